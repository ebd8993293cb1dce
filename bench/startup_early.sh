#!/bin/sh
# Start-up of a base build against a new one, interleaved round by round (docs/design.md §13,
# "Serving before the scan ends"): per cache size, the new build prepares a full cache on
# sparse files (every slot a clean line, one probe line's data written), then each round runs
# one `--child startup` of each build (the order alternating), each child timing `dd`, the
# slot table's recovery alone and the open, cold; a new build also times its first hit and
# the whole open when serving before the scan ends (before its plain open in even rounds,
# after it in odd ones). One JSON line per child; the files are deleted at the end of each
# size.
#
#   bench/startup_early.sh BASE_BINARY NEW_BINARY "1 8 64" ROUNDS DIR
set -eu
base=$1 new=$2 gibs=$3 rounds=$4 dir=$5
line=4096
for gib in $gibs; do
    "$new" --child prepare "$gib" "$line" "$dir" >/dev/null
    r=1
    while [ "$r" -le "$rounds" ]; do
        if [ $((r % 2)) -eq 1 ]; then order="base new" first=""; else order="new base" first=early-first; fi
        for which in $order; do
            if [ "$which" = base ]; then bin=$base; else bin=$new; fi
            printf '{"build":"%s","round":%d,"early_first":"%s","load":"%s","result":' "$which" "$r" "$first" \
                "$(cut -d' ' -f1 /proc/loadavg)"
            if [ "$which" = base ]; then
                "$bin" --child startup "$gib" "$line" "$dir" 1 | tr -d '\n'
            else
                "$bin" --child startup "$gib" "$line" "$dir" 1 $first | tr -d '\n'
            fi
            echo '}'
        done
        r=$((r + 1))
    done
    rm -f "$dir/memory-per-line-${gib}g-$line.cache" "$dir/memory-per-line-${gib}g-$line.backend" \
        "$dir/memory-per-line-${gib}g-$line.probe"
done
