#!/usr/bin/env bash
# Checks Baton's Vulkan backend on a machine with a real GPU and NO network,
# in under 5 minutes: the conformance suite on vulkan:0, `baton bench sync`
# with the device's hand-off rows, and `baton bench` of a synthetic model on
# vulkan:0 (-p 64 -n 32), and perplexity on vulkan:0 and cpu:0,vulkan:0
# against the CPU (SmolLM2 when carried in shared/models). Prints each
# step's output and a summary; exits non-zero when a step fails.
#
# Run it from a checkout where `cargo build --release -p baton-cli` made
# target/release/baton (or set BATON_BIN). It brings what it needs:
# - the Vulkan loader: when no libvulkan.so.1 is installed, it unpacks the
#   libvulkan1 .deb carried in shared/debs/ (or $BATON_DEBS; put there by
#   scripts/gpu-check-prepare.sh on a machine with network) into
#   target/gpu-check/root and puts it on LD_LIBRARY_PATH;
# - the driver: the vendor's ICD files in /usr/share/vulkan/icd.d and
#   /etc/vulkan/icd.d (Mesa's lavapipe, lvp_icd, only with
#   BATON_ALLOW_LAVAPIPE=1, for testing the script); with NVIDIA's driver
#   library present but no ICD file (a container without the graphics
#   capability), it writes one. With no driver it fails with a clear message.
#
# Knobs: BATON_GPU_CHECK_SHAPE (stories15M; tiny with BATON_ALLOW_LAVAPIPE=1,
# where stories15M's bench takes about a minute) and BATON_GPU_CHECK_TYPE
# (q8_0) of the synthetic model; BATON_GPU_CHECK_UNPACK=1 unpacks the loader even
# when one is installed (tests the unpacking).
set -uo pipefail
cd "$(dirname "$0")/.."

die() {
  echo "gpu-check: error: $*" >&2
  exit 1
}

baton=${BATON_BIN:-target/release/baton}
[ -x "$baton" ] || die "$baton not found: build it first (cargo build --release -p baton-cli) or set BATON_BIN"
work=target/gpu-check
mkdir -p "$work"

# The Vulkan loader.
have_loader() {
  ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 ' && return 0
  local d
  for d in ${LD_LIBRARY_PATH//:/ } /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
    [ -e "$d/libvulkan.so.1" ] && return 0
  done
  return 1
}
if [ "${BATON_GPU_CHECK_UNPACK:-0}" = 1 ] || ! have_loader; then
  debs=${BATON_DEBS:-shared/debs}
  mapfile -t packages < <(ls "$debs"/libvulkan1_*.deb 2>/dev/null)
  [ "${#packages[@]}" -gt 0 ] || die "no libvulkan1_*.deb in $debs to unpack (this machine has no libvulkan.so.1, or BATON_GPU_CHECK_UNPACK=1): run scripts/gpu-check-prepare.sh on a machine with network (same Debian/Ubuntu release) and carry $debs here, or set BATON_DEBS"
  root=$work/root
  rm -rf "$root" && mkdir -p "$root"
  for deb in "${packages[@]}"; do
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$deb" "$root" || die "dpkg-deb -x $deb failed"
    else
      # No dpkg: a .deb is an ar archive holding data.tar.*.
      tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$OLDPWD/$deb") || die "cannot unpack $deb (no dpkg-deb, ar failed)"
      tar -xf "$tmp"/data.tar.* -C "$root" || die "cannot unpack the data of $deb"
      rm -rf "$tmp"
    fi
  done
  lib=$(find "$root" -name 'libvulkan.so.1' | head -n 1)
  [ -n "$lib" ] || die "the packages in $debs hold no libvulkan.so.1"
  export LD_LIBRARY_PATH="$PWD/$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu-check: Vulkan loader unpacked from ${packages[*]} into $(dirname "$lib")"
else
  echo "gpu-check: Vulkan loader: installed"
fi

# The driver.
icds=()
for f in /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json; do
  [ -e "$f" ] || continue
  case "$(basename "$f")" in
    lvp_icd*) [ "${BATON_ALLOW_LAVAPIPE:-0}" = 1 ] || continue ;;
  esac
  icds+=("$f")
done
if [ "${#icds[@]}" = 0 ] && ldconfig -p 2>/dev/null | grep -q 'libGLX_nvidia\.so\.0 '; then
  cat >"$work/nvidia_icd.json" <<'EOF'
{"file_format_version": "1.0.0", "ICD": {"library_path": "libGLX_nvidia.so.0", "api_version": "1.3"}}
EOF
  icds=("$PWD/$work/nvidia_icd.json")
  echo "gpu-check: no ICD file, but NVIDIA's libGLX_nvidia.so.0 is installed: using $work/nvidia_icd.json"
fi
if [ "${#icds[@]}" = 0 ]; then
  present=$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null | tr '\n' ' ')
  die "no vendor Vulkan driver: no ICD file in /usr/share/vulkan/icd.d or /etc/vulkan/icd.d other than lavapipe's (present: ${present:-none}). Install the GPU driver's Vulkan part (NVIDIA: the driver's libGLX_nvidia.so.0 and nvidia_icd.json; in a container, NVIDIA_DRIVER_CAPABILITIES must include graphics), or set BATON_ALLOW_LAVAPIPE=1 to check the script on lavapipe"
fi
VK_ICD_FILENAMES=$(IFS=:; echo "${icds[*]}")
export VK_ICD_FILENAMES
echo "gpu-check: VK_ICD_FILENAMES=$VK_ICD_FILENAMES"

# The steps: each bounded, all run, a summary at the end.
failed=()
step() {
  local name=$1 limit=$2
  shift 2
  echo
  echo "== $name (at most ${limit}s): $*"
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  if [ "$rc" = 0 ]; then
    echo "== $name: ok ($((SECONDS - start))s)"
  else
    [ "$rc" = 124 ] && echo "== $name: TIMED OUT after ${limit}s" || echo "== $name: FAILED (exit $rc)"
    failed+=("$name")
  fi
  return 0
}

step devices 15 "$baton" devices --devices vulkan:0
if [ "${#failed[@]}" != 0 ]; then
  die "vulkan:0 does not open with VK_ICD_FILENAMES=$VK_ICD_FILENAMES (see above): none of these drivers found its GPU (Mesa's intel/radeon ICDs are installed with lavapipe and find nothing on other GPUs)"
fi
step conformance 80 "$baton" conformance --devices vulkan:0
step "bench sync" 45 "$baton" bench sync --iterations 500 --devices vulkan:0
shape=stories15M
[ "${BATON_ALLOW_LAVAPIPE:-0}" = 1 ] && shape=tiny
shape=${BATON_GPU_CHECK_SHAPE:-$shape}
dtype=${BATON_GPU_CHECK_TYPE:-q8_0}
model=$work/synth-$shape-$dtype.gguf
step "synth model" 20 "$baton" model synth --shape "$shape" --type "$dtype" -o "$model"
step bench 80 "$baton" bench -m "$model" --devices vulkan:0 -p 64 -n 32 -r 3
# Mixed devices give the CPU's results, on a text long enough for the
# comparison to mean something (chunk noise; scripts/compare-perplexity.py):
# SmolLM2 when it was carried in shared/models (gpu-check-prepare.sh puts it
# there), else the synthetic model; the GPL-3 when installed, else README.md.
ppl_model=${BATON_SMOLLM2:-shared/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -s "$ppl_model" ] || ppl_model=$model
text=/usr/share/common-licenses/GPL-3
[ -s "$text" ] || text=README.md
chunks=()
[ "${BATON_ALLOW_LAVAPIPE:-0}" = 1 ] && chunks=(--chunks 4)
if command -v python3 >/dev/null 2>&1; then
  export BATON=$baton
  step "mixed perplexity ($(basename "$ppl_model"))" 60 python3 scripts/compare-perplexity.py \
    -m "$ppl_model" -f "$text" -c 256 "${chunks[@]}" "--devices cpu" "--devices vulkan:0" "--devices cpu:0,vulkan:0 -sm layer"
else
  echo "gpu-check: no python3: the mixed perplexity step is skipped"
fi

echo
if [ "${#failed[@]}" = 0 ]; then
  echo "gpu-check: all steps passed ($SECONDS s)"
else
  echo "gpu-check: FAILED: ${failed[*]} ($SECONDS s)"
  exit 1
fi
