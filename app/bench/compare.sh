#!/usr/bin/env bash
# Measures a base commit against HEAD (the working tree's commit) with go test benchmarks,
# interleaved, and compares them with benchstat.
#
#   bench/compare.sh [-base REV] [-count N] [-benchtime T] [-cpu LIST] [-o DIR] [-dirty]
#                    [-overlay FILE]... PKG REGEX
#
#   bench/compare.sh -base main ./pool/ 'AcquireRelease$'
#   bench/compare.sh -base 9fdca7b -count 10 -benchtime 200ms ./pool/ 'AcquireRelease(Contended)?$'
#
# How: a git worktree of REV (default: main) in a temporary directory; one test binary built
# from each tree (go test -c, so neither run pays for compiling); then N rounds (default 10),
# each running both binaries once with -test.count 1, base first in odd rounds and HEAD first
# in even rounds (ABBA), so that a change in the machine's load falls on both alike. The
# 1-minute load average is recorded before every run (load.txt, and a summary at the end):
# these machines are shared, and a comparison taken at load 12 says less than one at load 1.
# Results: DIR/base.txt, DIR/head.txt (benchstat's input), DIR/load.txt, DIR/benchstat.txt.
# -dirty benchmarks the working tree as it is instead of HEAD (uncommitted changes included).
# -overlay FILE (repeatable, a path in the repository) copies HEAD's version of FILE into the
# base tree before building, e.g. a _test.go file whose benchmark reports a new metric; the
# file must compile against the base code.
#
# benchstat is golang.org/x/perf/cmd/benchstat at the version the project pins (HELPERS.md).
set -euo pipefail

BENCHSTAT=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
base=main count=10 benchtime=1s cpu= out= dirty= overlays=()
usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 && $1 == -* ]]; do
	case $1 in
	-base) base=$2; shift 2 ;;
	-count) count=$2; shift 2 ;;
	-benchtime) benchtime=$2; shift 2 ;;
	-cpu) cpu=$2; shift 2 ;;
	-o) out=$2; shift 2 ;;
	-dirty) dirty=1; shift ;;
	-overlay) overlays+=("$2"); shift 2 ;;
	-h | --help) usage ;;
	*) echo "compare.sh: unknown flag $1" >&2; usage ;;
	esac
done
[[ $# -eq 2 ]] || usage
pkg=$1 regex=$2
[[ $count =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: -count must be a positive integer" >&2; exit 2; }

root=$(git rev-parse --show-toplevel)
cd "$root"
baserev=$(git rev-parse --verify "$base^{commit}") || { echo "compare.sh: no commit $base" >&2; exit 2; }
headrev=$(git rev-parse HEAD)
[[ -n $out ]] || out=$(mktemp -d /tmp/benchcmp.XXXXXX)
mkdir -p "$out"
tmp=$(mktemp -d /tmp/benchcmp-tree.XXXXXX)
cleanup() {
	git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true
	[[ -z $dirty ]] && { git -C "$root" worktree remove --force "$tmp/head" >/dev/null 2>&1 || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

log() { printf '[compare] %s\n' "$*" >&2; }
load1() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo nan; }

git worktree add --detach "$tmp/base" "$baserev" >/dev/null 2>&1
headtree=$root
if [[ -z $dirty ]]; then
	git worktree add --detach "$tmp/head" "$headrev" >/dev/null 2>&1
	headtree=$tmp/head
fi
for f in "${overlays[@]}"; do
	cp "$headtree/$f" "$tmp/base/$f"
	log "overlay: base uses HEAD's $f"
done
log "base $(git log -1 --format='%h %s' "$baserev")${overlays[*]:+ (overlaid: ${overlays[*]})}"
log "head $(git log -1 --format='%h %s' "$headrev")${dirty:+ + uncommitted changes}"
(cd "$tmp/base" && go test -c -o "$tmp/base.test" "$pkg")
(cd "$headtree" && go test -c -o "$tmp/head.test" "$pkg")

args=(-test.run '^$' -test.bench "$regex" -test.benchmem -test.count 1 -test.benchtime "$benchtime")
[[ -n $cpu ]] && args+=(-test.cpu "$cpu")
: >"$out/base.txt" : >"$out/head.txt"
printf 'round\tbinary\tload1_before\tload1_after\n' >"$out/load.txt"
run() { # which round
	local which=$1 round=$2 tree=$tmp/base l0
	[[ $which == head ]] && tree=$headtree
	l0=$(load1)
	# Run in the package directory of its own tree, as go test does (testdata, relative paths).
	(cd "$tree/$pkg" && "$tmp/$which.test" "${args[@]}") >"$tmp/run.txt"
	if [[ $round -eq 1 ]]; then cat "$tmp/run.txt" >>"$out/$which.txt"; else grep '^Benchmark' "$tmp/run.txt" >>"$out/$which.txt" || true; fi
	printf '%d\t%s\t%s\t%s\n' "$round" "$which" "$l0" "$(load1)" >>"$out/load.txt"
}
start=$(date +%s)
for ((i = 1; i <= count; i++)); do
	log "round $i of $count (load $(load1))"
	if ((i % 2)); then run base "$i"; run head "$i"; else run head "$i"; run base "$i"; fi
done

{
	echo "# base $baserev${overlays[*]:+ with HEAD versions of: ${overlays[*]}}  head $headrev${dirty:+ (dirty)}"
	echo "# go test $pkg -bench '$regex' -benchtime $benchtime${cpu:+ -cpu $cpu}, $count interleaved rounds, $(($(date +%s) - start)) s"
	awk -F'\t' 'NR > 1 { v = $3 + 0; s += v; n++; if (n == 1 || v < lo) lo = v; if (v > hi) hi = v }
		END { if (n) printf "# load average (1 min) before each run: min %.2f, mean %.2f, max %.2f over %d runs\n", lo, s / n, hi, n }' "$out/load.txt"
	echo "# $(nproc) CPUs, $(go version)"
	(cd "$out" && go run "$BENCHSTAT" base.txt head.txt)
} | tee "$out/benchstat.txt"
log "results in $out"
