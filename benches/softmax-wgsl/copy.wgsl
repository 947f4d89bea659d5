// copy: hand-written, one row of 1024 per workgroup of 128, two vec4 per invocation
struct Launch { num_programs: vec3<u32>, program_offset: vec3<u32>, a: i32, b: i32, c: i32, d: i32, }
@group(0) @binding(0) var<storage, read_write> output_ptr: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> input_ptr: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> launch: Launch;
var<workgroup> sh: array<f32, 4>;
var<workgroup> sh2: array<f32, 4>;
@compute @workgroup_size(128)
fn softmax_kernel(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let row = wg.x * 256u + launch.program_offset.x;
    let t = sid * 32u + lane;
    let a = input_ptr[row + t];
    let b = input_ptr[row + t + 128u];
    output_ptr[row + t] = a;
    output_ptr[row + t + 128u] = b;
}
