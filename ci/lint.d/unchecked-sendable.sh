#!/usr/bin/env bash
# Rule: every `@unchecked Sendable` conformance in Sources/ and Simulator/ (comments and docs do not
# count) carries a one-line reason beside it: a `// unchecked: <reason>` comment at the end of the
# same line or on the line just above. And there are at most $budget of them: make a type checked
# (Mutex from Synchronization, Locked, a value type, `sending`) before spending one.
set -uo pipefail
cd "$(dirname "$0")/../.."
budget=10
status=0
count=0
while IFS= read -r -d '' file; do
    # awk prints "line<TAB>ok|missing" for each conformance outside comments and string literals.
    while IFS=$'\t' read -r line verdict; do
        count=$((count + 1))
        if [ "$verdict" = missing ]; then
            echo "$file:$line: @unchecked Sendable without a reason: add \`// unchecked: <why it is safe>\` on this line or the one above"
            status=1
        fi
    done < <(awk '
        function code(s,   out, i, c, n, inblock) {
            # strip block comments (state across lines), line comments and string literals
            out = ""; n = length(s); i = 1
            while (i <= n) {
                if (inblk) {
                    if (substr(s, i, 2) == "*/") { inblk = 0; i += 2 } else i++
                    continue
                }
                c = substr(s, i, 1)
                if (substr(s, i, 2) == "/*") { inblk = 1; i += 2; continue }
                if (substr(s, i, 2) == "//") break
                if (c == "\"") { i++; while (i <= n && substr(s, i, 1) != "\"") { if (substr(s, i, 1) == "\\") i++; i++ } i++; continue }
                out = out c; i++
            }
            return out
        }
        {
            reason = ($0 ~ /\/\/[[:space:]]*unchecked:[[:space:]]*[^[:space:]]/) || (prev ~ /^[[:space:]]*\/\/[[:space:]]*unchecked:[[:space:]]*[^[:space:]]/)
            if (code($0) ~ /@unchecked[[:space:]]+Sendable/) print NR "\t" (reason ? "ok" : "missing")
            prev = $0
        }' "$file")
done < <(find Sources Simulator -type f -name '*.swift' -print0 | sort -z)
if [ "$count" -gt "$budget" ]; then
    echo "unchecked-sendable: $count @unchecked Sendable conformances, budget $budget: make one checked before adding one" >&2
    status=1
fi
[ $status -eq 0 ] || echo "unchecked-sendable: failed ($count in use, budget $budget)" >&2
exit $status
