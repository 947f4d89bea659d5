// warps=4: rutile's softmax (block 1024) as emitted for NVIDIA (subgroups of 32), through naga's WGSL writer
struct Launch {
    num_programs: vec3<u32>,
    program_offset: vec3<u32>,
    input_row_stride: i32,
    output_row_stride: i32,
    n_rows: i32,
    n_cols: i32,
}

@group(0) @binding(0) 
var<storage, read_write> output_ptr: array<vec4<f32>>;
@group(0) @binding(1) 
var<storage, read_write> input_ptr: array<vec4<f32>>;
@group(0) @binding(2) 
var<uniform> launch: Launch;
var<workgroup> shared0_: array<i32, 4>;
var<workgroup> shared1_: array<f32, 4>;

@compute @workgroup_size(128, 1, 1) 
fn softmax_kernel(@builtin(local_invocation_index) local_index: u32, @builtin(workgroup_id) workgroup_id: vec3<u32>, @builtin(subgroup_id) subgroup_id: u32, @builtin(subgroup_invocation_id) subgroup_lane: u32) {
    var r49_: f32 = 0f;
    var r50_: f32 = 0f;
    var r51_: f32 = 0f;
    var r52_: f32 = 0f;
    var r53_: f32 = 0f;
    var r54_: f32 = 0f;
    var r55_: f32 = 0f;
    var r56_: f32 = 0f;

    let thread_id = bitcast<i32>(((subgroup_id * 32u) + subgroup_lane));
    let _e16 = launch.program_offset.x;
    let program_id_0_ = bitcast<i32>((workgroup_id.x + _e16));
    let param_input_row_stride = launch.input_row_stride;
    let param_output_row_stride = launch.output_row_stride;
    let param_n_rows = launch.n_rows;
    let param_n_cols = launch.n_cols;
    let r9_ = (thread_id & 31i);
    let r10_ = (thread_id >> 5u);
    let r11_ = (r9_ & 31i);
    let r13_ = (r10_ & 3i);
    let r14_ = (r13_ << 5u);
    let r15_ = (r14_ + r11_);
    let r17_ = (r15_ << 2u);
    let r19_ = (r17_ + 1i);
    let r20_ = (r17_ + 2i);
    let r21_ = (r17_ + 3i);
    let r23_ = (r17_ + 512i);
    let r25_ = (r17_ + 513i);
    let r27_ = (r17_ + 514i);
    let r29_ = (r17_ + 515i);
    let r48_ = bitcast<f32>(4286578688u);
    let r30_ = (r17_ < param_n_cols);
    let r31_ = (r19_ < param_n_cols);
    let r32_ = (r20_ < param_n_cols);
    let r33_ = (r21_ < param_n_cols);
    let r34_ = (r23_ < param_n_cols);
    let r35_ = (r25_ < param_n_cols);
    let r36_ = (r27_ < param_n_cols);
    let r37_ = (r29_ < param_n_cols);
    let r38_ = (program_id_0_ * param_input_row_stride);
    let r39_ = (0i + r38_);
    let r40_ = (r39_ + r17_);
    let r41_ = (r39_ + r19_);
    let r42_ = (r39_ + r20_);
    let r43_ = (r39_ + r21_);
    let r44_ = (r39_ + r23_);
    let r45_ = (r39_ + r25_);
    let r46_ = (r39_ + r27_);
    let r47_ = (r39_ + r29_);
    r49_ = r48_;
    r50_ = r48_;
    r51_ = r48_;
    r52_ = r48_;
    if r30_ {
        let _e88 = input_ptr[(bitcast<u32>(r40_) >> 2u)];
        r49_ = _e88.x;
        r50_ = _e88.y;
        r51_ = _e88.z;
        r52_ = _e88.w;
    }
    r53_ = r48_;
    r54_ = r48_;
    r55_ = r48_;
    r56_ = r48_;
    if r34_ {
        let _e105 = input_ptr[(bitcast<u32>(r44_) >> 2u)];
        r53_ = _e105.x;
        r54_ = _e105.y;
        r55_ = _e105.z;
        r56_ = _e105.w;
    }
    let _e110 = r49_;
    let r57_ = bitcast<i32>(_e110);
    let r58_ = (r57_ >> 31u);
    let r60_ = (r58_ & 2147483647i);
    let r61_ = (r57_ ^ r60_);
    let r62_ = (r57_ & 2147483647i);
    let r64_ = (r62_ > 2139095040i);
    let r65_ = select(r61_, 2147483647i, r64_);
    let _e119 = r50_;
    let r66_ = bitcast<i32>(_e119);
    let r67_ = (r66_ >> 31u);
    let r68_ = (r67_ & 2147483647i);
    let r69_ = (r66_ ^ r68_);
    let r70_ = (r66_ & 2147483647i);
    let r71_ = (r70_ > 2139095040i);
    let r72_ = select(r69_, 2147483647i, r71_);
    let r73_ = max(r65_, r72_);
    let _e129 = r51_;
    let r74_ = bitcast<i32>(_e129);
    let r75_ = (r74_ >> 31u);
    let r76_ = (r75_ & 2147483647i);
    let r77_ = (r74_ ^ r76_);
    let r78_ = (r74_ & 2147483647i);
    let r79_ = (r78_ > 2139095040i);
    let r80_ = select(r77_, 2147483647i, r79_);
    let r81_ = max(r73_, r80_);
    let _e139 = r52_;
    let r82_ = bitcast<i32>(_e139);
    let r83_ = (r82_ >> 31u);
    let r84_ = (r83_ & 2147483647i);
    let r85_ = (r82_ ^ r84_);
    let r86_ = (r82_ & 2147483647i);
    let r87_ = (r86_ > 2139095040i);
    let r88_ = select(r85_, 2147483647i, r87_);
    let r89_ = max(r81_, r88_);
    let _e149 = r53_;
    let r90_ = bitcast<i32>(_e149);
    let r91_ = (r90_ >> 31u);
    let r92_ = (r91_ & 2147483647i);
    let r93_ = (r90_ ^ r92_);
    let r94_ = (r90_ & 2147483647i);
    let r95_ = (r94_ > 2139095040i);
    let r96_ = select(r93_, 2147483647i, r95_);
    let r97_ = max(r89_, r96_);
    let _e159 = r54_;
    let r98_ = bitcast<i32>(_e159);
    let r99_ = (r98_ >> 31u);
    let r100_ = (r99_ & 2147483647i);
    let r101_ = (r98_ ^ r100_);
    let r102_ = (r98_ & 2147483647i);
    let r103_ = (r102_ > 2139095040i);
    let r104_ = select(r101_, 2147483647i, r103_);
    let r105_ = max(r97_, r104_);
    let _e169 = r55_;
    let r106_ = bitcast<i32>(_e169);
    let r107_ = (r106_ >> 31u);
    let r108_ = (r107_ & 2147483647i);
    let r109_ = (r106_ ^ r108_);
    let r110_ = (r106_ & 2147483647i);
    let r111_ = (r110_ > 2139095040i);
    let r112_ = select(r109_, 2147483647i, r111_);
    let r113_ = max(r105_, r112_);
    let _e179 = r56_;
    let r114_ = bitcast<i32>(_e179);
    let r115_ = (r114_ >> 31u);
    let r116_ = (r115_ & 2147483647i);
    let r117_ = (r114_ ^ r116_);
    let r118_ = (r114_ & 2147483647i);
    let r119_ = (r118_ > 2139095040i);
    let r120_ = select(r117_, 2147483647i, r119_);
    let r121_ = max(r113_, r120_);
    let _e190 = subgroupShuffleXor(r121_, 1u);
    let r123_ = max(r121_, _e190);
    let _e193 = subgroupShuffleXor(r123_, 2u);
    let r125_ = max(r123_, _e193);
    let _e196 = subgroupShuffleXor(r125_, 4u);
    let r127_ = max(r125_, _e196);
    let _e199 = subgroupShuffleXor(r127_, 8u);
    let r129_ = max(r127_, _e199);
    let _e202 = subgroupShuffleXor(r129_, 16u);
    let r131_ = max(r129_, _e202);
    let r132_ = (r10_ >> 0u);
    let r133_ = (r132_ & 3i);
    let r134_ = (0i + r133_);
    shared0_[bitcast<u32>(r134_)] = r131_;
    workgroupBarrier();
    let r136_ = shared0_[0u];
    let r138_ = shared0_[1u];
    let r139_ = max(r136_, r138_);
    let r141_ = shared0_[2u];
    let r142_ = max(r139_, r141_);
    let r144_ = shared0_[3u];
    let r145_ = max(r142_, r144_);
    workgroupBarrier();
    let r146_ = (r145_ >> 31u);
    let r147_ = (r146_ & 2147483647i);
    let r148_ = (r145_ ^ r147_);
    let r149_ = bitcast<f32>(r148_);
    let _e234 = r49_;
    let r150_ = (_e234 - r149_);
    let _e236 = r50_;
    let r151_ = (_e236 - r149_);
    let _e238 = r51_;
    let r152_ = (_e238 - r149_);
    let _e240 = r52_;
    let r153_ = (_e240 - r149_);
    let _e242 = r53_;
    let r154_ = (_e242 - r149_);
    let _e244 = r54_;
    let r155_ = (_e244 - r149_);
    let _e246 = r55_;
    let r156_ = (_e246 - r149_);
    let _e248 = r56_;
    let r157_ = (_e248 - r149_);
    let r158_ = exp(r150_);
    let r159_ = exp(r151_);
    let r160_ = exp(r152_);
    let r161_ = exp(r153_);
    let r162_ = exp(r154_);
    let r163_ = exp(r155_);
    let r164_ = exp(r156_);
    let r165_ = exp(r157_);
    let r166_ = (r158_ + r159_);
    let r167_ = (r166_ + r160_);
    let r168_ = (r167_ + r161_);
    let r169_ = (r168_ + r162_);
    let r170_ = (r169_ + r163_);
    let r171_ = (r170_ + r164_);
    let r172_ = (r171_ + r165_);
    let _e266 = subgroupShuffleXor(r172_, 1u);
    let r174_ = (r172_ + _e266);
    let _e269 = subgroupShuffleXor(r174_, 2u);
    let r176_ = (r174_ + _e269);
    let _e272 = subgroupShuffleXor(r176_, 4u);
    let r178_ = (r176_ + _e272);
    let _e275 = subgroupShuffleXor(r178_, 8u);
    let r180_ = (r178_ + _e275);
    let _e278 = subgroupShuffleXor(r180_, 16u);
    let r182_ = (r180_ + _e278);
    let r183_ = (r10_ >> 0u);
    let r184_ = (r183_ & 3i);
    let r185_ = (0i + r184_);
    shared1_[bitcast<u32>(r185_)] = r182_;
    workgroupBarrier();
    let r187_ = shared1_[0u];
    let r189_ = shared1_[1u];
    let r190_ = (r187_ + r189_);
    let r192_ = shared1_[2u];
    let r193_ = (r190_ + r192_);
    let r195_ = shared1_[3u];
    let r196_ = (r193_ + r195_);
    workgroupBarrier();
    let r197_ = (r158_ / r196_);
    let r198_ = (r159_ / r196_);
    let r199_ = (r160_ / r196_);
    let r200_ = (r161_ / r196_);
    let r201_ = (r162_ / r196_);
    let r202_ = (r163_ / r196_);
    let r203_ = (r164_ / r196_);
    let r204_ = (r165_ / r196_);
    let r205_ = (program_id_0_ * param_output_row_stride);
    let r206_ = (0i + r205_);
    let r207_ = (r206_ + r17_);
    let r208_ = (r206_ + r19_);
    let r209_ = (r206_ + r20_);
    let r210_ = (r206_ + r21_);
    let r211_ = (r206_ + r23_);
    let r212_ = (r206_ + r25_);
    let r213_ = (r206_ + r27_);
    let r214_ = (r206_ + r29_);
    if r30_ {
        output_ptr[(bitcast<u32>(r207_) >> 2u)] = vec4<f32>(r197_, r198_, r199_, r200_);
    }
    if r34_ {
        output_ptr[(bitcast<u32>(r211_) >> 2u)] = vec4<f32>(r201_, r202_, r203_, r204_);
    }
}
