//! Compiles the WGSL compute shaders in `src/shaders/` to SPIR-V with naga
//! (pure Rust, so `cargo build` needs no system tool).
//!
//! Each op has one shader source; ops that read or write several element
//! types are instantiated once per type by putting that type's file (its
//! block size and decode or store function) next to the op's source:
//! `matmul` + `types/q4_1.wgsl` is `matmul_q4_1`; quantized types also get
//! `act_q8.wgsl` (their dot products round activations to 8 bits, as the
//! CPU backend does), float types `act_f32.wgsl` (activations as they
//! are). Every shader starts with `common.wgsl` (bindings, indexing,
//! conversions, the error word).

use std::fmt::Write as _;
use std::path::Path;

/// Types whose blocks ops read (`block_elem`, `block_dot`).
const LOAD_TYPES: [&str; 9] = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"];
/// Types ops write (`store_elem`).
const STORE_TYPES: [&str; 3] = ["f32", "f16", "bf16"];
/// Ops of plain f32 (or raw bytes), one shader each.
const PLAIN: [&str; 6] = ["unary", "broadcast", "rms_norm", "softmax", "rope", "contiguous"];
/// Ops instantiated per read type.
const PER_LOAD_TYPE: [&str; 3] = ["get_rows", "matmul", "matmul_rows"];
/// Types of a KV cache's keys and values (`KT`, `VT`: 0 f32, 1 f16, 2 bf16,
/// 3 q8_0, 4 q4_0); attention is instantiated per pair, and ScatterRows per
/// block type (`scatter_rows_block.wgsl` with `stores/block_*.wgsl`).
const KV_TYPES: [(&str, u32); 5] = [("f32", 0), ("f16", 1), ("bf16", 2), ("q8_0", 3), ("q4_0", 4)];
/// Ops instantiated per written type.
const PER_STORE_TYPE: [&str; 2] = ["copy_into", "scatter_rows"];

fn read(dir: &Path, file: &str) -> String {
    let path = dir.join(file);
    println!("cargo:rerun-if-changed={}", path.display());
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn compile(name: &str, source: &str) -> Vec<u32> {
    let module =
        naga::front::wgsl::parse_str(source).unwrap_or_else(|e| panic!("shader {name}: {}", e.emit_to_string(source)));
    let mut validator = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::IMMEDIATES
            | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32
            | naga::valid::Capabilities::SUBGROUP,
    );
    // Shuffles in compute shaders (the device is checked for them when opened).
    validator
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::BASIC | naga::valid::SubgroupOperationSet::SHUFFLE);
    let info = validator.validate(&module).unwrap_or_else(|e| panic!("shader {name}: {}", e.emit_to_string(source)));
    let mut options = naga::back::spv::Options {
        lang_version: (1, 3),
        // The host guarantees every access is in bounds; out-of-range
        // accesses are still skipped (reads give 0), so a shader bug cannot
        // write outside its binding.
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::ReadZeroSkipWrite,
            buffer: naga::proc::BoundsCheckPolicy::Restrict,
            image_load: naga::proc::BoundsCheckPolicy::ReadZeroSkipWrite,
            binding_array: naga::proc::BoundsCheckPolicy::ReadZeroSkipWrite,
        },
        ..Default::default()
    };
    options.flags.remove(naga::back::spv::WriterFlags::DEBUG);
    options.use_storage_input_output_16 = false;
    let pipeline =
        naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .unwrap_or_else(|e| panic!("shader {name}: SPIR-V output: {e}"))
}

fn main() {
    let dir = Path::new("src/shaders");
    let common = read(dir, "common.wgsl");
    let mut shaders: Vec<(String, String)> = Vec::new();
    for op in PLAIN {
        shaders.push((op.into(), format!("{common}\n{}", read(dir, &format!("{op}.wgsl")))));
    }
    let matmul_params = read(dir, "matmul_params.wgsl");
    for op in PER_LOAD_TYPE {
        let mut body = read(dir, &format!("{op}.wgsl"));
        if op.starts_with("matmul") {
            body = format!("{matmul_params}\n{body}");
        }
        for ty in LOAD_TYPES {
            let mut types = read(dir, &format!("types/{ty}.wgsl"));
            let act = if ty.starts_with('q') { "act_q8.wgsl" } else { "act_f32.wgsl" };
            types = format!("{types}\n{}", read(dir, act));
            shaders.push((format!("{op}_{ty}"), format!("{common}\n{types}\n{body}")));
        }
    }
    let attention = read(dir, "attention.wgsl");
    for (k, kc) in KV_TYPES {
        for (v, vc) in KV_TYPES {
            let consts = format!("const KT: u32 = {kc}u;\nconst VT: u32 = {vc}u;");
            shaders.push((format!("attention_{k}_{v}"), format!("{common}\n{consts}\n{attention}")));
        }
    }
    // Activation rounding for quantized matmuls, per block size.
    let quantize = read(dir, "quantize_act.wgsl");
    for block in [32, 256] {
        let source = format!("{common}\nconst BLOCK_ELEMS: u32 = {block}u;\n{quantize}");
        shaders.push((format!("quantize_act_{block}"), source));
    }
    // ScatterRows shares its parameters between the per-element stores and
    // the per-block ones (rows quantized into a block-typed KV cache).
    let scatter_params = read(dir, "scatter_params.wgsl");
    let blocks = read(dir, "scatter_rows_block.wgsl");
    for (ty, _) in &KV_TYPES[3..] {
        let store = read(dir, &format!("stores/block_{ty}.wgsl"));
        shaders.push((format!("scatter_rows_{ty}"), format!("{common}\n{scatter_params}\n{blocks}\n{store}")));
    }
    for op in PER_STORE_TYPE {
        let mut body = read(dir, &format!("{op}.wgsl"));
        if op == "scatter_rows" {
            body = format!("{scatter_params}\n{body}");
        }
        for ty in STORE_TYPES {
            let stores = read(dir, &format!("stores/{ty}.wgsl"));
            shaders.push((format!("{op}_{ty}"), format!("{common}\n{body}\n{stores}")));
        }
    }
    let mut out = String::from("/// The compiled shaders, by name (generated by build.rs).\n");
    out.push_str("pub(crate) static SHADERS: &[(&str, &[u32])] = &[\n");
    for (name, source) in &shaders {
        let words = compile(name, source);
        write!(out, "    ({name:?}, &[").expect("string");
        for w in words {
            write!(out, "{w:#x},").expect("string");
        }
        out.push_str("]),\n");
    }
    out.push_str("];\n");
    let target = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("shaders.rs");
    std::fs::write(&target, out).expect("writing shaders.rs");
}
