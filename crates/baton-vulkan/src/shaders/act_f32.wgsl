// Activations of a float matmul: used as they are (the interface of
// act_q8.wgsl with d = 1).

fn act_scale(x: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 1.0);
}

fn act_value(x: u32, e: u32, id: f32) -> f32 {
    return bitcast<f32>(b[x + e]);
}
