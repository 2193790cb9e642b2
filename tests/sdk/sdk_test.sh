#!/usr/bin/env bash
# The SDK story end to end (registered in CTest as sdk.out_of_tree_example_plugin, label "sdk"):
#   1. cmake --install the build tree into a temporary prefix, check the layout and RUNPATHs;
#   2. copy plugins/example out of the source tree and build it with find_package(Tandem) against
#      that prefix only (CMAKE_PREFIX_PATH);
#   3. run the *installed* tandem on a tiny config that names the example plugin through
#      "plugin_paths" (then through TANDEM_PLUGIN_PATH, on the meta target), check its file;
#   4. `tandem plugins` from the prefix, with no environment variable, lists the built-in
#      plugins from <prefix>/lib/tandem/plugins;
#   5. `tandem devices` and one epoch of the installed fashion-mlp config (Fashion-MNIST) from the
#      prefix; with the CUDA module removed from the prefix, devices and a cuda plan say so.
# usage: sdk_test.sh <build dir> <source dir> <scratch dir> <c++ compiler> <cmake generator>
# Works in <scratch dir>/run-<pid>/, removed when every check passed.
set -euo pipefail
build=$1 src=$2 cxx=$4 generator=$5
# A folder of its own: two test runs at once (two developers, one build tree) must not collide.
work=$3/run-$$
prefix=$work/prefix

source "$src/tests/install_checks.sh"

rm -rf "$work"
mkdir -p "$work"
unset TANDEM_PLUGIN_PATH

step "install into $prefix"
quiet cmake --install "$build" --prefix "$prefix"
libdir=$(find_libdir "$prefix")
for f in bin/tandem "$libdir/libtandem.so.0" include/tandem/plugin.hpp include/tandem/callback.hpp \
         "$libdir/tandem/plugins/tandem-terminate_on_nan.so" share/tandem/configs/fashion-mlp.json \
         "$libdir/cmake/Tandem/TandemConfig.cmake" "$libdir/cmake/Tandem/TandemConfigVersion.cmake" \
         "$libdir/cmake/Tandem/TandemTargets.cmake"; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
for f in tandem-epoch_logger.so tandem-lifetime.so tandem-wrong_abi.so; do
  [ ! -e "$prefix/$libdir/tandem/plugins/$f" ] || fail "$f is not a built-in plugin but was installed"
done
readelf -d "$prefix/bin/tandem" | grep -E 'R(UN)?PATH' | grep -qF '$ORIGIN/../lib' ||
  fail "bin/tandem has no \$ORIGIN-relative RUNPATH: $(readelf -d "$prefix/bin/tandem" | grep PATH)"
readelf -d "$prefix/$libdir/tandem/plugins/tandem-terminate_on_nan.so" | grep -E 'R(UN)?PATH' |
  grep -qF '$ORIGIN/../..' || fail "the built-in plugins have no \$ORIGIN/../.. RUNPATH"
if readelf -d "$prefix/bin/tandem" "$prefix/$libdir"/tandem/plugins/*.so | grep -E 'R(UN)?PATH' |
   grep -qF "$build"; then
  fail "an installed file still has a build-tree RUNPATH"
fi

step "the installed headers are the SDK, and each compiles on its own"
sdk_headers="atomic_file callback checkpoint_file device_plan devices error event_sink export layer logs
  model model_view parameter plugin rng run_files snapshot tensor training_state"
installed=$(cd "$prefix/include/tandem" && ls | sed 's/\.hpp$//' | sort | tr '\n' ' ')
expected=$(printf '%s\n' $sdk_headers | sort | tr '\n' ' ')
[ "$installed" = "$expected" ] ||
  fail "the installed headers are [$installed], not the SDK's [$expected]"
for h in $sdk_headers; do
  echo "#include \"tandem/$h.hpp\"" | "$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" -x c++ - ||
    fail "tandem/$h.hpp does not compile on its own against the installed headers"
done

step "build plugins/example out of tree against the installed package"
cp -r "$src/plugins/example" "$work/example-src"  # away from Tandem's source tree
quiet cmake -S "$work/example-src" -B "$work/example-build" -G "$generator" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
grep -q "Tandem_DIR:PATH=$prefix/$libdir/cmake/Tandem" "$work/example-build/CMakeCache.txt" ||
  fail "find_package(Tandem) did not use the installed package: $(grep Tandem_DIR "$work/example-build/CMakeCache.txt")"
quiet cmake --build "$work/example-build" -j2
plugin=$work/example-build/tandem-epoch_logger.so
[ -f "$plugin" ] || fail "the example build made no tandem-epoch_logger.so"

step "train with the installed tandem, the plugin named through plugin_paths"
cat > "$work/run.json" <<'JSON'
{
  "name": "sdk",
  "seed": 1,
  "batch_size": 16,
  "model": {"class_name": "Sequential", "config": {"layers": [
    {"class_name": "Dense", "config": {"units": 8, "activation": "relu", "input_shape": [4]}},
    {"class_name": "Dense", "config": {"units": 3}}]}},
  "loss": {"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": true}},
  "metrics": ["accuracy"],
  "plugin_paths": ["example-build"],
  "callbacks": [{"plugin": "epoch_logger",
                 "options": {"file": "epochs.log", "metrics": ["loss", "accuracy", "val_loss"]}}]
}
JSON
synthetic='{"type": "synthetic", "samples": 64, "x_shape": [4], "task": "classes", "classes": 3, "seed": 1}'
quiet "$prefix/bin/tandem" train "$work/run.json" --set "data.train=$synthetic" --set epochs=1 \
  --run-dir "$work/run1" -q
[ -f "$work/run1/epochs.log" ] || fail "the example plugin wrote no epochs.log"
line=$(cat "$work/run1/epochs.log")
[[ $(wc -l <"$work/run1/epochs.log") -eq 1 && $line =~ ^epoch=1\ loss=[0-9.e+-]+\ accuracy=[0-9.e+-]+\ val_loss=NA$ ]] ||
  fail "unexpected epochs.log: $line"
grep -q "\"path\":\"$plugin\"" "$work/run1/events.jsonl" ||
  fail "run_started does not name the plugin's file $plugin"

step "the same plugin through TANDEM_PLUGIN_PATH, on the meta target with two replicas"
quiet env TANDEM_PLUGIN_PATH="$work/example-build" "$prefix/bin/tandem" train "$work/run.json" \
  --set "data.train=$synthetic" --set epochs=2 --set plugin_paths=[] --devices cpu:2 \
  --set 'callbacks[0].target=meta' --set 'callbacks[0].options.metrics=["loss"]' \
  --run-dir "$work/run2" -q
[ "$(wc -l <"$work/run2/epochs.log")" -eq 2 ] || fail "expected 2 lines: $(cat "$work/run2/epochs.log")"
grep -Eq '^epoch=2 loss=[0-9.e+-]+ replicas=2 slowest_step_s=' "$work/run2/epochs.log" ||
  fail "unexpected meta-target line: $(cat "$work/run2/epochs.log")"

step "tandem plugins from the prefix, no environment"
check_builtin_plugins "$prefix" "$libdir"
json=$(env TANDEM_PLUGIN_PATH="$work/example-build" "$prefix/bin/tandem" plugins --json)
check_json='
import json, sys
doc = json.loads(sys.argv[2])
by_name = {p["name"]: p for p in doc["plugins"]}
p = by_name["epoch_logger"]
assert p["ok"] and p["path"] == sys.argv[1], p
assert {"file", "metrics", "every"} <= set(p["options_schema"]["properties"]), p
assert all(q["ok"] for q in doc["plugins"]), doc
'
/usr/bin/python3 -c "$check_json" "$plugin" "$json" || fail "tandem plugins --json is wrong: $json"

step "tandem devices and one epoch of the installed fashion-mlp, from the prefix"
quiet "$prefix/bin/tandem" devices
grep -q '^cpu ' "$work/last.log" || fail "tandem devices shows no CPU row: $(cat "$work/last.log")"
config=$prefix/share/tandem/configs/fashion-mlp.json
if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  quiet env -u TANDEM_PLUGIN_PATH "$prefix/bin/tandem" train "$config" --set epochs=1 \
    --run-dir "$work/fashion" -q
  [ -s "$work/fashion/model.h5" ] || fail "fashion-mlp from the prefix saved no model.h5"
  /usr/bin/python3 - "$work/fashion/events.jsonl" <<'PY' || fail "fashion-mlp from the prefix"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
epochs = [e for e in events if e["event"] == "epoch_ended"]
assert len(epochs) == 1, epochs
logs = epochs[0]["logs"]
# One epoch of this MLP reaches about 0.8 validation accuracy; chance is 0.1.
assert logs["val_accuracy"] > 0.7, logs
PY
else
  echo "(no Fashion-MNIST here: the dataset-fashion-mnist package is missing; skipped)"
fi

if [ -d "$prefix/$libdir/tandem/modules" ]; then
  step "without the CUDA module: devices and a cuda plan say it is not installed"
  rm -rf "$prefix/$libdir/tandem/modules"
  out=$("$prefix/bin/tandem" devices 2>&1) || fail "tandem devices failed: $out"
  grep -q "no CUDA GPU: the CUDA module .*libtandem-cuda.so is not installed" <<<"$out" ||
    fail "tandem devices does not say the CUDA module is missing: $out"
  rc=0
  out=$("$prefix/bin/tandem" train "$work/run.json" --set "data.train=$synthetic" --devices cuda:0 \
        --run-dir "$work/nocuda" -q 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "a cuda:0 plan ran without the CUDA module"
  grep -q "libtandem-cuda.so is not installed" <<<"$out" || fail "unclear error for cuda:0: $out"

  step "a garbage CUDA module and one from another version are refused in words"
  mkdir -p "$prefix/$libdir/tandem/modules"
  module=$prefix/$libdir/tandem/modules/libtandem-cuda.so
  echo "not a shared library" >"$module"
  out=$("$prefix/bin/tandem" devices 2>&1) || fail "tandem devices failed on a garbage module: $out"
  grep -q "no CUDA GPU: the CUDA module could not be loaded: .*libtandem-cuda.so" <<<"$out" ||
    fail "tandem devices on a garbage module: $out"
  # A module whose table says another version (the first field of CudaModuleApi).
  printf '%s\n' 'struct Api { const char* version; void* rest[2]; };' \
    'static const Api api{"9.9.9", {nullptr, nullptr}};' \
    'extern "C" const Api* tandem_cuda_module() { return &api; }' >"$work/old_module.cpp"
  quiet "$cxx" -shared -fPIC -o "$module" "$work/old_module.cpp"
  out=$("$prefix/bin/tandem" devices 2>&1) || fail "tandem devices failed on an old module: $out"
  grep -q "the CUDA module .* is from Tandem 9.9.9, not " <<<"$out" ||
    fail "tandem devices on a module of another version: $out"
fi

step "done"
rm -rf "$work"  # kept when a step fails, for a look
