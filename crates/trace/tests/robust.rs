//! Arbitrary and mutated input never panics: every reader returns records or an error.

use proptest::prelude::*;
use tiercache_trace::{read_all, stats, CsvSpec, Format, ReadOptions, StatsOptions};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn samples() -> Vec<(Format, Vec<u8>)> {
    let f = |name: &str| std::fs::read(format!("{DATA}/{name}")).unwrap();
    vec![
        (Format::Blkparse, f("sample.blkparse")),
        (Format::Fiu, f("sample.fiu")),
        (Format::FioIolog, f("sample-v2.iolog")),
        (Format::FioIolog, f("sample-v3.iolog")),
        (Format::Spc, f("sample.spc")),
        (Format::Alibaba, f("sample.alibaba.csv")),
        (Format::Msr, b"128166385295514663,hm,0,Write,9056014336,2048,2833\n128166385295514878,hm,0,Read,1,512,1\n".to_vec()),
        (Format::Tencent, b"1538323200,4247200,128,1,1058\n1538323199,13896880,128,0,1063\n".to_vec()),
        (Format::Systor, b"Timestamp,Response,IOType,LUN,Offset,Size\n1456095145.133076000,0.000806000,R,0,899056122368,131072\n".to_vec()),
    ]
}

fn read_everything(path: &str, format: Option<Format>) {
    let csv: CsvSpec = "time=0:us,volume=1,op=2,offset=3,len=4".parse().unwrap();
    for skip_bad in [false, true] {
        let opts = ReadOptions {
            skip_bad,
            csv: Some(csv.clone()),
            ..ReadOptions::default()
        };
        // Either outcome is fine; a panic is not.
        let _ = read_all(path, format, &opts);
        // 1 MiB lines bound the footprint work of random 4 GiB requests.
        let _ = stats(
            path,
            format,
            &opts,
            &StatsOptions {
                line_size: 1 << 20,
                ..StatsOptions::default()
            },
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn mutated_text_never_panics(which in 0usize..9, edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12)) {
        let (format, mut bytes) = samples().swap_remove(which);
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.txt");
        std::fs::write(&p, &bytes).unwrap();
        read_everything(p.to_str().unwrap(), Some(format));
        read_everything(p.to_str().unwrap(), None);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), format in 0usize..12) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.bin");
        std::fs::write(&p, &bytes).unwrap();
        let p = p.to_str().unwrap();
        read_everything(p, Some(Format::ALL[format]));
        read_everything(p, None);
        // The same bytes behind a native magic exercise the header validation.
        let mut native = b"TCTRACE\0".to_vec();
        native.extend_from_slice(&bytes);
        let n = dir.path().join("a.tctrace");
        std::fs::write(&n, &native).unwrap();
        read_everything(n.to_str().unwrap(), None);
    }
}
