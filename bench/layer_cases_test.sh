#!/usr/bin/env bash
# ctest bench.layer_cases: every case of bench/layer_cases.py is a run config tandem_bench trains
# (a few steps at batch 8), and the tools refuse what they cannot run with a message naming it.
# Usage: bench/layer_cases_test.sh TANDEM_BENCH
set -euo pipefail
bench=${1:?usage: layer_cases_test.sh TANDEM_BENCH}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cases=$($python "$here/layer_cases.py" --list)
[[ $(wc -l <<< "$cases") -ge 8 ]] || fail "layer_cases.py --list names $(wc -l <<< "$cases") cases"
for name in $cases; do
  $python "$here/layer_cases.py" --config "$name" > "$work/$name.json"
  rate=$("$bench" --config "$work/$name.json" --batch 8 --quick 2>"$work/err" |
         $python -c "import json,sys; print(json.load(sys.stdin)['workloads']['config']['step']['samples_per_s'])") ||
    fail "$name: tandem_bench failed: $(cat "$work/err")"
  $python -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$rate" ||
    fail "$name: $rate samples/s"
  echo "$name: $rate samples/s at batch 8"
done
if $python "$here/layer_cases.py" --config no_such_case > /dev/null 2> "$work/err"; then
  fail "an unknown case was accepted"
fi
grep -q "no case 'no_such_case'" "$work/err" || fail "unknown case: $(cat "$work/err")"
echo '{"model": 3}' > "$work/bad.json"
if "$bench" --config "$work/bad.json" > /dev/null 2> "$work/err"; then fail "a bad config ran"; fi
grep -q "config error at 'model'" "$work/err" || fail "bad config: $(cat "$work/err")"
if "$bench" --config "$work/missing.json" > /dev/null 2> "$work/err"; then fail "a missing file ran"; fi
grep -q "cannot open $work/missing.json" "$work/err" || fail "missing file: $(cat "$work/err")"
echo "all cases train; bad inputs are refused"
