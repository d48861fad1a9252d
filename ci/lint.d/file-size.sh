#!/usr/bin/env bash
# Rule: a Swift, C or C++ source or header under Sources/, Simulator/ or Tests/ has at most
# $limit lines, unless one of its first 8 lines says why, in a comment of the form
#     // Over 500 lines because <reason>
# (a `/* … */` or `#` comment also counts). Split by job first; a reason is for files that are one job.
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=500
# Files over the limit that other branches were editing when this rule landed (issue 38): their
# split waits for the merge. Each entry says why; delete it when the file is split. Do not add to it.
pending=(
    "Sources/CaptureMedia/MovieWriter.swift"          # split after the issue 38-42 merge (edited on other branches)
    "Sources/CaptureKitTesting/CaptureHarness.swift"  # split after the issue 38-42 merge (edited on other branches)
    "Sources/CaptureKitTesting/Scenario.swift"        # split after the issue 38-42 merge (edited on other branches)
    "Tests/CaptureKitTests/DeviceContractTests.swift" # split after the issue 40 merge (the contract suite grows there)
)
status=0
while IFS= read -r -d '' file; do
    lines=$(wc -l < "$file")
    [ "$lines" -gt "$limit" ] || continue
    for p in "${pending[@]}"; do
        if [ "$file" = "$p" ]; then
            echo "file-size: note: $file has $lines lines; its split is pending (see ci/lint.d/file-size.sh)"
            continue 2
        fi
    done
    if head -n 8 "$file" | grep -Eq '^[[:space:]]*(//+|/\*+|\*|#)[[:space:]]*Over 500 lines because [^[:space:]]'; then
        continue
    fi
    echo "$file: $lines lines (over $limit): split it by job, or say why in its first 8 lines (// Over 500 lines because …)"
    status=1
done < <(find Sources Simulator Tests -type f \( -name '*.swift' -o -name '*.c' -o -name '*.h' \
    -o -name '*.cpp' -o -name '*.cc' -o -name '*.hpp' \) -print0 | sort -z)
# A pending entry whose file was split (or removed) must go, so the list only shrinks.
for p in "${pending[@]}"; do
    if [ ! -f "$p" ] || [ "$(wc -l < "$p")" -le "$limit" ]; then
        echo "$p: no longer over $limit lines: remove it from \`pending\` in ci/lint.d/file-size.sh"
        status=1
    fi
done
[ $status -eq 0 ] || echo "file-size: files over $limit lines without a reason (see above)" >&2
exit $status
