// warps=4: hand-written, NaN-propagating max on integer keys, one row of 1024 per workgroup of 128, two vec4 per invocation
struct Launch { num_programs: vec3<u32>, program_offset: vec3<u32>, a: i32, b: i32, c: i32, d: i32, }
@group(0) @binding(0) var<storage, read_write> output_ptr: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> input_ptr: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> launch: Launch;
var<workgroup> sh: array<i32, 4>;
var<workgroup> sh2: array<f32, 4>;
fn key(x: f32) -> i32 {
    let b = bitcast<i32>(x);
    return select(b ^ ((b >> 31u) & 2147483647i), 2147483647i, (b & 2147483647i) > 2139095040i);
}
fn unkey(k: i32) -> f32 { return bitcast<f32>(k ^ ((k >> 31u) & 2147483647i)); }
@compute @workgroup_size(128)
fn softmax_kernel(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let row = wg.x * 256u + launch.program_offset.x;
    let t = sid * 32u + lane;
    let a = input_ptr[row + t];
    let b = input_ptr[row + t + 128u];
    var m = max(max(max(key(a.x), key(a.y)), max(key(a.z), key(a.w))), max(max(key(b.x), key(b.y)), max(key(b.z), key(b.w))));
    m = max(m, subgroupShuffleXor(m, 1u));
    m = max(m, subgroupShuffleXor(m, 2u));
    m = max(m, subgroupShuffleXor(m, 4u));
    m = max(m, subgroupShuffleXor(m, 8u));
    m = max(m, subgroupShuffleXor(m, 16u));
    sh[sid] = m;
    workgroupBarrier();
    m = max(max(sh[0], sh[1]), max(sh[2], sh[3]));
    let mf = unkey(m);
    let ea = exp(a - mf);
    let eb = exp(b - mf);
    var s = ea.x + ea.y + ea.z + ea.w + eb.x + eb.y + eb.z + eb.w;
    s = s + subgroupShuffleXor(s, 1u);
    s = s + subgroupShuffleXor(s, 2u);
    s = s + subgroupShuffleXor(s, 4u);
    s = s + subgroupShuffleXor(s, 8u);
    s = s + subgroupShuffleXor(s, 16u);
    sh2[sid] = s;
    workgroupBarrier();
    s = sh2[0] + sh2[1] + sh2[2] + sh2[3];
    output_ptr[row + t] = ea / s;
    output_ptr[row + t + 128u] = eb / s;
}
