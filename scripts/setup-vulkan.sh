#!/usr/bin/env bash
# The Vulkan backend's test driver: Mesa's lavapipe (a conformant Vulkan 1.3
# driver that runs on the CPU), the Khronos validation layer and glslc.
# Installs them with apt when missing, then prints the path of lavapipe's
# ICD file (for VK_ICD_FILENAMES). Fails loudly when the driver cannot be
# found afterwards: the Vulkan tests must run, not skip.
set -euo pipefail

# (No `grep -q` after a pipe: under pipefail its early exit would fail the
# writer with SIGPIPE and make an installed driver look missing.)
find_icd() { ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1 || true; }
have_all() {
  [ -n "$(find_icd)" ] \
    && [ -e /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ] \
    && command -v glslc >/dev/null 2>&1 \
    && ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null
}

if ! have_all; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Vulkan packages (lavapipe, validation layers, glslc)..." >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      mesa-vulkan-drivers vulkan-validationlayers glslc libvulkan1 >&2
  else
    echo "Vulkan packages are missing; as root: apt-get install mesa-vulkan-drivers vulkan-validationlayers glslc libvulkan1" >&2
  fi
fi

icd=$(find_icd)
if [ -z "$icd" ]; then
  echo "error: Mesa's lavapipe ICD (/usr/share/vulkan/icd.d/lvp_icd.*.json) not found" >&2
  exit 1
fi
echo "$icd"
