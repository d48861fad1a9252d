#!/usr/bin/env bash
# Rule: a Swift, C or C++ source or header under Sources/, Simulator/ or Tests/ has at most
# $limit lines, unless one of its first 8 lines says why, in a comment of the form
#     // Over 500 lines because <reason>
# (a `/* … */` or `#` comment also counts). Split by job first; a reason is for files that are one job.
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=500
status=0
while IFS= read -r -d '' file; do
    lines=$(wc -l < "$file")
    [ "$lines" -gt "$limit" ] || continue
    if head -n 8 "$file" | grep -Eq '^[[:space:]]*(//+|/\*+|\*|#)[[:space:]]*Over 500 lines because [^[:space:]]'; then
        continue
    fi
    echo "$file: $lines lines (over $limit): split it by job, or say why in its first 8 lines (// Over 500 lines because …)"
    status=1
done < <(find Sources Simulator Tests -type f \( -name '*.swift' -o -name '*.c' -o -name '*.h' \
    -o -name '*.cpp' -o -name '*.cc' -o -name '*.hpp' \) -print0 | sort -z)
[ $status -eq 0 ] || echo "file-size: files over $limit lines without a reason (see above)" >&2
exit $status
