#!/usr/bin/env bash
# The packages end to end (registered in CTest as package.deb_and_tarball, label "package"):
#   1. cpack this build tree: tandem, tandem-dev (and tandem-cuda when CUDA is built) .deb files
#      and the .tar.gz;
#   2. lintian reports no error; the control fields name Debian packages;
#   3. dpkg -i all of them into a scratch root (--force-depends, after checking that every
#      dependency is installed on this machine, where the binaries will find them), then from
#      there: tandem --version, tandem plugins (every built-in plugin, no environment variable),
#      tandem devices, tandem-gui --version, the desktop entry and its icon; dpkg -r removes
#      every file again;
#   4. the .tar.gz unpacked anywhere runs the same way (relocatable).
# usage: package_test.sh <build dir> <scratch dir> <version>
# Works in <scratch dir>/run-<pid>/, removed when every check passed.
set -euo pipefail
build=$1 version=$3
work=$2/run-$$
dist=$work/dist

source "$(dirname "$0")/../install_checks.sh"

for tool in cpack dpkg dpkg-deb dpkg-checkbuilddeps lintian desktop-file-validate; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/setup installs it)"
done
rm -rf "$work"
mkdir -p "$work"
unset TANDEM_PLUGIN_PATH TANDEM_ENGINE

step "cpack"
quiet cpack --config "$build/CPackConfig.cmake" -B "$dist"
arch=$(dpkg --print-architecture)
packages=(tandem tandem-dev)
grep -q '"cuda"' "$build/CPackConfig.cmake" && packages+=(tandem-cuda)
debs=()
for p in "${packages[@]}"; do
  deb=$dist/${p}_${version}_${arch}.deb
  [ -f "$deb" ] || fail "cpack made no $deb: $(ls "$dist")"
  debs+=("$deb")
done
tarball=$(ls "$dist"/Tandem-"$version"-Linux-*.tar.gz) || fail "cpack made no .tar.gz"

step "lintian"
lintian --fail-on error "${debs[@]}" >"$work/lintian.txt" 2>&1 ||
  { cat "$work/lintian.txt" >&2; fail "lintian found errors"; }
cat "$work/lintian.txt"

step "control fields"
field() { dpkg-deb --field "$1" "$2"; }
depends=$(field "${debs[0]}" Depends)
for needed in libc6 libdnnl2 libhdf5 libspdlog libstdc++6; do
  grep -q "$needed" <<<"$depends" || fail "tandem does not depend on $needed: $depends"
done
if [ -e "$build/gui/tandem-gui" ]; then
  grep -q "libqt6widgets6" <<<"$depends" || fail "tandem does not depend on Qt 6: $depends"
  grep -q "libqt6svg6" <<<"$depends" || fail "tandem-gui's SVG icon needs libqt6svg6: $depends"
fi
grep -qF "tandem (= $version)" <<<"$(field "${debs[1]}" Depends)" ||
  fail "tandem-dev must depend on this very tandem: $(field "${debs[1]}" Depends)"
for deb in "${debs[@]}"; do
  control=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)
  grep -Eq 'postinst|postrm|preinst|prerm' <<<"$control" && fail "$deb has maintainer scripts: $control"
  [ "$(field "$deb" Version)" = "$version" ] || fail "$deb has version $(field "$deb" Version)"
done
grep -q "activate-noawait ldconfig" < <(dpkg-deb --ctrl-tarfile "${debs[0]}" | tar -xO ./triggers) ||
  fail "tandem has no ldconfig trigger"
shlibs=$(dpkg-deb --ctrl-tarfile "${debs[0]}" | tar -xO ./shlibs)
minor=${version#*.}
minor=${minor%%.*}
[ "$shlibs" = "libtandem 0 tandem (>= $version), tandem (<< 0.$((minor + 1))~)" ] ||
  fail "unexpected shlibs: $shlibs"
# Every dependency that is not one of our own packages is installed here: that is what makes
# --force-depends below honest (the binaries in the scratch root load this machine's libraries).
# (dpkg-checkbuilddeps resolves versions and virtual packages the way dpkg does.)
printf 'Source: tandem-test\n\nPackage: tandem-test\nArchitecture: any\n' >"$work/control"
for deb in "${debs[@]}"; do
  deps=$(field "$deb" Depends | tr ',' '\n' | grep -v '^ *tandem ' | paste -sd, -)
  dpkg-checkbuilddeps -d "$deps" "$work/control" >"$work/deps.txt" 2>&1 ||
    fail "$(basename "$deb")'s dependencies are not all installed here: $(cat "$work/deps.txt")"
done

step "dpkg -i into a scratch root"
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
quiet dpkg --root="$root" --force-depends --install "${debs[@]}"
dpkg --root="$root" --list | grep -Eq "^ii +tandem +$version" || fail "tandem is not installed"
libdir=usr/$(find_libdir "$root/usr")
[ "$("$root/usr/bin/tandem" --version)" = "tandem $version" ] ||
  fail "tandem --version says: $("$root/usr/bin/tandem" --version)"
check_builtin_plugins "$root/usr" "${libdir#usr/}"
json=$("$root/usr/bin/tandem" devices --json) || fail "tandem devices --json failed"
/usr/bin/python3 - "$json" "${packages[*]}" <<'PY' || fail "tandem devices --json: $json"
import json, sys
doc = json.loads(sys.argv[1])
assert doc["cpu"]["logical_cores"] >= 1, doc
# The installed CUDA module is found next to the installed libtandem (or none is packaged).
assert doc["cuda"]["built"] == ("tandem-cuda" in sys.argv[2].split()), doc["cuda"]
PY
if [ -e "$root/usr/bin/tandem-gui" ]; then
  [ "$("$root/usr/bin/tandem-gui" --version 2>/dev/null)" = "tandem-gui $version" ] ||
    fail "tandem-gui --version says: $("$root/usr/bin/tandem-gui" --version 2>&1)"
  desktop=$root/usr/share/applications/tandem-gui.desktop
  quiet desktop-file-validate "$desktop"
  grep -qx "Exec=tandem-gui %f" "$desktop" || fail "the desktop entry does not run tandem-gui"
  icon=$(sed -n 's/^Icon=//p' "$desktop")
  for f in scalable/apps/$icon.svg 48x48/apps/$icon.png 256x256/apps/$icon.png; do
    [ -s "$root/usr/share/icons/hicolor/$f" ] || fail "no icon $f for Icon=$icon"
  done
fi

step "dpkg -r"
quiet dpkg --root="$root" --remove "${packages[@]}"
left=$(cd "$root" && find usr -not -type d 2>/dev/null || true)
[ -z "$left" ] || fail "dpkg -r left files behind: $left"

step "the .tar.gz, unpacked anywhere"
mkdir -p "$work/elsewhere"
tar -xzf "$tarball" -C "$work/elsewhere"
prefix=$(echo "$work"/elsewhere/Tandem-*)
[ "$("$prefix/bin/tandem" --version)" = "tandem $version" ] || fail "tandem from the .tar.gz"
check_builtin_plugins "$prefix" "$(find_libdir "$prefix")"
[ -f "$prefix/include/tandem/plugin.hpp" ] || fail "the .tar.gz has no SDK headers"

step "done"
rm -rf "$work"
