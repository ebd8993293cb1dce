#!/usr/bin/env bash
# fio on files `tiercache mount` already caches, against the same fio on the fast directory
# itself, side by side in one run (docs/design.md §14):
#   fast        the fast directory (tmpfs by default): the anchor
#   tc          `tiercache mount` (write-back), files held whole passed through to the kernel
#   tc-nopt     the same with --no-passthrough: every request reaches the mount (the block
#               path, with FUSE writeback caching): the mount as it was before passthrough
# Workloads: 4 KiB random read, 1 MiB sequential read, 4 KiB random write, each with 1 and 8
# jobs (one file of SIZE per job). The files are written through each contender first (and
# fsynced), so a mount holds them in its cache; then each workload runs RUNTIME seconds.
#
# Every contender is mounted at once; each of ROUNDS rounds runs every workload on every
# contender in turn, in an order rotating by round (interleaved, so the shared machine's
# load changes reach all alike).
# Prints one table: the median IOPS over rounds per contender and workload, and each as a
# ratio to the fast directory's median.
#
#   base, base-nopt
#               the same two run by another build (BASELINE_TIERCACHE), for a before/after in
#               one run (they are added to the default contenders when it is set)
#
# Usage: bench/fio_file_cache.sh
# Environment: SIZE (32MiB per job), RUNTIME (5), ROUNDS (1), CACHE_SIZE (512MiB), FAST_DIR (/dev/shm),
#   SLOW_DIR (/var/tmp), TIERCACHE (target/release/tiercache), ONLY (a subset of the
#   contenders: "fast tc tc-nopt base base-nopt"), TC_ARGS (more `tiercache mount` options
#   for tc and tc-nopt), BASELINE_TIERCACHE (the build base and base-nopt run).
set -euo pipefail

SIZE=${SIZE:-32MiB}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-1}
CACHE_SIZE=${CACHE_SIZE:-512MiB}
FAST_DIR=${FAST_DIR:-/dev/shm}
SLOW_DIR=${SLOW_DIR:-/var/tmp}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TIERCACHE=${TIERCACHE:-$ROOT/target/release/tiercache}
BASELINE_TIERCACHE=${BASELINE_TIERCACHE:-}
TC_ARGS=${TC_ARGS:-}
if [ -n "$BASELINE_TIERCACHE" ]; then
  ONLY=${ONLY:-"fast tc tc-nopt base base-nopt"}
else
  ONLY=${ONLY:-"fast tc tc-nopt"}
fi

for tool in fio python3 fusermount3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/setup.sh" >&2; exit 1; }
done
[ -x "$TIERCACHE" ] || { echo "missing $TIERCACHE: cargo build --release -p tiercache" >&2; exit 1; }

FAST=$(mktemp -d "$FAST_DIR/fio-fast.XXXXXX")
SLOW=$(mktemp -d "$SLOW_DIR/fio-slow.XXXXXX")
mkdir -p "$FAST/dir"
declare -A DIR PID

unmount() {
  mountpoint -q "$1" && { fusermount3 -u "$1" 2>/dev/null || fusermount3 -u -z "$1" || true; }
  for _ in $(seq 1 100); do mountpoint -q "$1" || return 0; sleep 0.05; done
}

cleanup() {
  for name in "${!PID[@]}"; do
    unmount "$SLOW/mnt-$name" || true
    kill "${PID[$name]}" 2>/dev/null || true
  done
  rm -rf "$FAST" "$SLOW"
}
trap cleanup EXIT

WORKLOADS="randread-4k:1 randread-4k:8 read-1m:1 read-1m:8 randwrite-4k:1 randwrite-4k:8"

# fio in directory $1, workload $2 (name:jobs); prints its total IOPS.
fio_in() {
  local dir=$1 name=${2%%:*} jobs=${2##*:} rw bs
  case $name in
    randread-4k) rw=randread bs=4k ;;
    read-1m) rw=read bs=1m ;;
    randwrite-4k) rw=randwrite bs=4k ;;
  esac
  fio --name=w --directory="$dir" --filename_format='data.$jobnum' --rw=$rw --bs=$bs \
    --size="$SIZE" --numjobs="$jobs" --time_based --runtime="$RUNTIME" --ramp_time=1 \
    --ioengine=psync --group_reporting --output-format=json |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(round(j["read"]["iops"]+j["write"]["iops"]))'
}

# Writes the 8 files through directory $1 and fsyncs them: a mount then holds them.
prepare() {
  fio --name=prep --directory="$1" --filename_format='data.$jobnum' --rw=write --bs=1m \
    --size="$SIZE" --numjobs=8 --end_fsync=1 --ioengine=psync >/dev/null
}

# Mounts contender $1 (each its own store, cache and mount point) and writes its files.
start_contender() {
  local name=$1
  case $name in
    fast) DIR[$name]=$FAST/dir ;;
    tc|tc-nopt|base|base-nopt)
      local args=() bin=$TIERCACHE mnt=$SLOW/mnt-$name
      case $name in
        tc*) read -r -a args <<<"$TC_ARGS" ;;
        base*) bin=${BASELINE_TIERCACHE:?base contenders need BASELINE_TIERCACHE} ;;
      esac
      [[ $name == *-nopt ]] && args+=(--no-passthrough)
      mkdir -p "$FAST/cache-$name" "$SLOW/store-$name" "$mnt"
      "$bin" mount "$SLOW/store-$name" "$mnt" --cache-dir "$FAST/cache-$name" \
        --cache-size "$CACHE_SIZE" --variant wb "${args[@]}" --stats "$SLOW/$name-stats.json" \
        2>"$SLOW/$name.log" &
      PID[$name]=$!
      for _ in $(seq 1 200); do mountpoint -q "$mnt" && break; sleep 0.05; done
      mountpoint -q "$mnt" || { echo "mount did not appear: $(cat "$SLOW/$name.log")" >&2; exit 1; }
      DIR[$name]=$mnt
      ;;
  esac
  prepare "${DIR[$name]}"
}

stop_contender() {
  local name=$1
  [ "$name" = fast ] && return 0
  kill -TERM "${PID[$name]}"; wait "${PID[$name]}" || true; unset "PID[$name]"
  unmount "$SLOW/mnt-$name"
  python3 -c 'import json,sys; s=json.load(open(sys.argv[2])); print(" ", sys.argv[1], "passthrough opens", s["passthrough_opens"], "images copied", s.get("passthrough_images_copied", "-"), "kept", s.get("passthrough_images_reused", "-"), "reads", s["reads"], "writes", s["writes"])' \
    "$name" "$SLOW/$name-stats.json" >&2 || true
}

echo "fio: $SIZE per job, ${RUNTIME}s per workload, psync, cache $CACHE_SIZE on $FAST_DIR," \
  "$ROUNDS rounds" >&2
for name in $ONLY; do start_contender "$name"; done
# Interleaved: each round runs every workload on every contender in turn, so a change of the
# machine's load reaches all of them alike; the table gives each one's median over rounds.
declare -A IOPS
read -r -a NAMES <<<"$ONLY"
for round in $(seq 1 "$ROUNDS"); do
  for w in $WORKLOADS; do
    # The order rotates by round: no contender always follows the same one.
    for i in "${!NAMES[@]}"; do
      name=${NAMES[$(((i + round - 1) % ${#NAMES[@]}))]}
      IOPS[$name,$w,$round]=$(fio_in "${DIR[$name]}" "$w")
      printf 'round %s %-8s %-16s %10s IOPS\n' "$round" "$name" "$w" \
        "${IOPS[$name,$w,$round]}" >&2
    done
  done
done
for name in $ONLY; do stop_contender "$name"; done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
declare -A MED
for w in $WORKLOADS; do
  for name in $ONLY; do
    vals=()
    for round in $(seq 1 "$ROUNDS"); do vals+=("${IOPS[$name,$w,$round]}"); done
    MED[$name,$w]=$(median "${vals[@]}")
  done
done

printf '\n%-16s' workload
for name in $ONLY; do printf ' %12s' "$name"; done
for name in $ONLY; do [ "$name" != fast ] && printf ' %12s' "$name/fast"; done
printf '\n'
for w in $WORKLOADS; do
  printf '%-16s' "$w"
  for name in $ONLY; do printf ' %12s' "${MED[$name,$w]}"; done
  for name in $ONLY; do
    [ "$name" = fast ] && continue
    printf ' %12s' "$(awk -v a="${MED[$name,$w]}" -v b="${MED[fast,$w]:-0}" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')"
  done
  printf '\n'
done
