#!/usr/bin/env bash
# No raw sleep in the tests (issue 40): a `sleep`, `usleep`, `Thread.sleep` or `Task.sleep` (or a
# clock's `.sleep(`) in Tests/ or Sources/CaptureKitTesting fails unless ci/lint.d/sleep-allowlist.txt
# allows it. Await an event, step virtual time, or use CaptureKitTesting's deadline-bounded
# `eventually` / `waitUntil` instead; keep a real-time sleep only where the claim is about real time.
#
# Allow-list lines: `path:pattern  # reason`. The pattern is the name of the function the sleep is
# in, a fixed piece of the sleep's line, or `*` (any sleep in that file). Every entry needs a reason.
# Comments (`//`, `///`) are not code and are not checked. Exit 1 with file:line for each offence.
set -euo pipefail
cd "$(dirname "$0")/../.."
allow=ci/lint.d/sleep-allowlist.txt
[ -f "$allow" ] || { echo "test-sleeps: $allow is missing" >&2; exit 1; }
mapfile -t files < <(find Tests Sources/CaptureKitTesting -name '*.swift' | LC_ALL=C sort)
awk -v allow="$allow" '
BEGIN {
    n = 0; bad = 0
    while ((getline line < allow) > 0) {
        lineno++
        if (line ~ /^[[:space:]]*(#|$)/) continue
        cut = index(line, " # ")
        reason = cut ? substr(line, cut + 3) : ""
        gsub(/^[[:space:]]+|[[:space:]]+$/, "", reason)
        if (reason == "") { printf "%s:%d: an allow-list entry without a `# reason`: %s\n", allow, lineno, line; bad = 1; continue }
        entry = substr(line, 1, cut - 1); gsub(/^[[:space:]]+|[[:space:]]+$/, "", entry)
        colon = index(entry, ":")
        if (colon < 2 || colon == length(entry)) { printf "%s:%d: not `path:pattern  # reason`: %s\n", allow, lineno, line; bad = 1; continue }
        path[n] = substr(entry, 1, colon - 1); pat[n] = substr(entry, colon + 1); where[n] = lineno; used[n] = 0; n++
    }
}
FNR == 1 { fn = "" }
{
    code = $0
    sub(/\/\/.*/, "", code)   # comments are not code (a sleep named in a string is rare enough to allow-list)
    if (match(code, /func[[:space:]]+[A-Za-z_][A-Za-z0-9_]*/)) { fn = substr(code, RSTART, RLENGTH); sub(/^func[[:space:]]+/, "", fn) }
    if (code ~ /(^|[^A-Za-z0-9_])(usleep|sleep)[[:space:]]*\(|Thread\.sleep|Task\.sleep/) {
        ok = 0
        for (k = 0; k < n; k++)
            if (path[k] == FILENAME && (pat[k] == "*" || pat[k] == fn || index($0, pat[k]) > 0)) { ok = 1; used[k] = 1 }
        if (!ok) {
            line = $0; gsub(/^[[:space:]]+/, "", line)
            printf "%s:%d: raw sleep in %s: %s\n", FILENAME, FNR, (fn == "" ? "(top level)" : fn), line
            bad = 1; offences++
        }
    }
}
END {
    for (k = 0; k < n; k++)
        if (!used[k]) printf "test-sleeps: note: %s:%d matches no sleep any more (remove it): %s:%s\n", allow, where[k], path[k], pat[k] > "/dev/stderr"
    if (offences) printf "test-sleeps: %d raw sleep(s): await an event, step virtual time or use eventually/waitUntil (CaptureKitTesting); a sleep whose claim is about real time goes on %s with a reason\n", offences, allow > "/dev/stderr"
    exit bad
}' "${files[@]}"
