# Shell helpers of the install tests (tests/sdk/sdk_test.sh, tests/package/package_test.sh),
# sourced after they set $work (their scratch folder).

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== [$SECONDS s] $*"; }

# Runs a command quietly, showing its output only when it fails (the output stays in
# $work/last.log for a later look).
quiet() {
  local log=$work/last.log rc=0
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then cat "$log" >&2; fail "exit code $rc from: $*"; fi
}

# The library folder of an installed tree, relative to it: "lib" or "lib/<multiarch>".
find_libdir() {  # <prefix>
  local d
  for d in lib lib/*; do
    if [ -e "$1/$d/libtandem.so.0" ]; then echo "$d"; return 0; fi
  done
  fail "no libtandem.so.0 under $1/lib"
}

# `tandem plugins` of an installed tree, with no environment variable, lists every built-in
# plugin from <prefix>/<libdir>/tandem/plugins (all ten) and none is broken.
check_builtin_plugins() {  # <prefix> <libdir>
  local out p name n=0
  out=$(env -u TANDEM_PLUGIN_PATH "$1/bin/tandem" plugins) || fail "tandem plugins failed from $1"
  for p in "$1/$2"/tandem/plugins/tandem-*.so; do
    name=${p##*/tandem-}
    name=${name%.so}
    grep -Eq "^$name +[0-9][^ ]* +$p " <<<"$out" || fail "tandem plugins from $1 does not list $p"
    n=$((n + 1))
  done
  [ "$n" -ge 10 ] || fail "only $n built-in plugins in $1/$2/tandem/plugins"
  if grep -q BROKEN <<<"$out"; then fail "a built-in plugin is broken: $out"; fi
  return 0
}
