//! `device_print` through Vulkan: the kernel writes its lines as records into a print
//! buffer (`rutile_spirv`'s ABI, "Prints"); after the launch the runtime reads them back
//! and prints them as the interpreter does (`rutile_ir::interp::print_line`), so that a
//! line reads the same on every device. Lines come in the order the device wrote them.

use rutile_ir::interp::{print_line, print_value, PrintValue};
use rutile_ir::ScalarType;
use rutile_spirv::PrintSite;

/// Bytes of a launch's print buffer: about 250 000 lines of one value.
pub(crate) const PRINT_BUFFER_BYTES: usize = 4 << 20;

/// Prints the lines of the print buffer `words` of kernel `kernel`, whose sites are
/// `sites`; where the kernel asked for more words than the buffer holds, says how many
/// lines' worth did not fit (on stderr).
pub(crate) fn print_records(kernel: &str, sites: &[PrintSite], words: &[u32]) {
    let Some((&asked, records)) = words.split_first() else {
        return;
    };
    let mut at = 0;
    while at < (asked as usize).min(records.len()) {
        let Some(site) = sites.get(records[at] as usize) else {
            eprintln!(
                "rutile: `{kernel}`: a device_print record names site {}, which the kernel lacks",
                records[at]
            );
            return;
        };
        let len = site.record_words();
        let Some(record) = records.get(at..at + len) else {
            break;
        };
        print_record(site, record);
        at += len;
    }
    if (asked as usize) > at {
        eprintln!(
            "rutile: `{kernel}`: {} words of device_print lines did not fit the {PRINT_BUFFER_BYTES}-byte print buffer \
             and were dropped",
            asked as usize - at
        );
    }
}

/// One record of `site`: its index, the program ids, the coordinates, the values.
fn print_record(site: &PrintSite, record: &[u32]) {
    let pid = [record[1], record[2], record[3]];
    let idx: Vec<String> = record[4..4 + site.coords]
        .iter()
        .map(|&c| (c as i32).to_string())
        .collect();
    let mut at = 4 + site.coords;
    let mut values = Vec::with_capacity(site.values.len());
    for &t in &site.values {
        let word = record[at] as u64;
        let wide = || word | (record[at + 1] as u64) << 32;
        let v = match t {
            ScalarType::Bool => PrintValue::Bool(word != 0),
            ScalarType::I8 | ScalarType::I16 | ScalarType::I32 => PrintValue::Int(word as u32 as i32 as i128),
            ScalarType::U8 | ScalarType::U16 | ScalarType::U32 => PrintValue::Int(word as i128),
            ScalarType::I64 => PrintValue::Int(wide() as i64 as i128),
            ScalarType::U64 => PrintValue::Int(wide() as i128),
            ScalarType::F8E4M3
            | ScalarType::F8E5M2
            | ScalarType::F8E4M3B15
            | ScalarType::F8E4M3Fnuz
            | ScalarType::F8E5M2Fnuz
            | ScalarType::F16
            | ScalarType::BF16
            | ScalarType::F32 => PrintValue::Float(f32::from_bits(word as u32) as f64),
            ScalarType::F64 => PrintValue::Float(f64::from_bits(wide())),
        };
        values.push(print_value(v));
        at += rutile_spirv::print_words(t);
    }
    print_line(pid, &idx, &site.prefix, &values);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records as the kernel writes them print the interpreter's lines: every type's words,
    /// a site without values, and a buffer the kernel overran (the lines that fit print).
    #[test]
    fn records_print_the_interpreters_lines() {
        let sites = vec![
            PrintSite {
                prefix: "x".into(),
                coords: 2,
                values: vec![
                    ScalarType::F32,
                    ScalarType::I32,
                    ScalarType::Bool,
                    ScalarType::I64,
                    ScalarType::F64,
                ],
            },
            PrintSite {
                prefix: "hello".into(),
                coords: 0,
                values: vec![],
            },
        ];
        let big = -5_000_000_000i64 as u64;
        let half = 0.5f64.to_bits();
        let mut words = vec![
            0,
            0,
            1,
            2,
            3,
            4,
            5,
            1.25f32.to_bits(),
            -7i32 as u32,
            1,
            big as u32,
            (big >> 32) as u32,
            half as u32,
            (half >> 32) as u32,
            1,
            9,
            0,
            0,
        ];
        words[0] = (words.len() - 1) as u32 + 12;
        let ((), printed) = rutile_ir::interp::capture_prints(|| print_records("k", &sites, &words));
        assert_eq!(
            printed,
            "pid (1, 2, 3) idx (4, 5) x: 1.25, -7, true, -5000000000, 0.5\npid (9, 0, 0) hello\n"
        );
    }
}
