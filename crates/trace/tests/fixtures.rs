//! Every fixture under fixtures/traces and every sample under tests/data, read through `open`
//! with format auto-detection: exact record and volume counts, first and last records with
//! units checked.

use tiercache_core::{Op, Request, VolumeId};
use tiercache_trace::{read_all, BlkAction, Compression, CsvSpec, Format, ReadOptions};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn req(time_ns: u64, volume: u32, op: Op, offset: u64, len: u64) -> Request {
    Request {
        time_ns,
        volume: VolumeId(volume),
        op,
        offset,
        len,
    }
}

#[test]
fn msr_hm0_sample() {
    let path = format!("{TRACES}/msr-hm0-sample.csv");
    let (reqs, vols, c, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Msr);
    assert_eq!(reqs.len(), 1000);
    assert_eq!(c.records, 1000);
    assert_eq!(vols.names(), ["hm_0"]);
    // 128166385295514663,hm,0,Write,9056014336,2048,2833: FILETIME ticks of 100 ns.
    assert_eq!(reqs[0], req(0, 0, Op::Write, 9_056_014_336, 2048));
    // 128166386567849604,hm,0,Read,11946549248,4096,3499
    let last_ns = (128166386567849604u64 - 128166385295514663) * 100;
    assert_eq!(reqs[999], req(last_ns, 0, Op::Read, 11_946_549_248, 4096));
    // FILETIME epoch is 1601: unix seconds = t / 1e7 - 11644473600.
    assert_eq!(
        meta.epoch_unix_ns,
        Some((128166385295514663i64 - 116_444_736_000_000_000) * 100)
    );
    assert_eq!(reqs.iter().filter(|r| r.op == Op::Read).count(), 508);
    assert_eq!((c.unknown_ops, c.skipped_bad, c.clamped_times), (0, 0, 0));
}

#[test]
fn cloudphysics_vscsi_v1() {
    let path = format!("{TRACES}/cloudphysics-w.vscsi");
    let (reqs, vols, c, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Vscsi);
    assert_eq!(reqs.len(), 113_872);
    assert_eq!(vols.len(), 1);
    // First record: cmd 0x2a (write), len 512 bytes, lbn 42932745 sectors, ts 5633898368802 µs.
    assert_eq!(reqs[0], req(0, 0, Op::Write, 42_932_745 * 512, 512));
    let last_ns = (5_641_098_458_687u64 - 5_633_898_368_802) * 1000;
    assert_eq!(
        reqs[113_871],
        req(last_ns, 0, Op::Write, 42_936_150 * 512, 512)
    );
    assert_eq!(reqs.iter().filter(|r| r.op == Op::Read).count(), 46_974);
    assert_eq!(reqs.iter().filter(|r| r.op == Op::Write).count(), 66_898);
    assert_eq!(meta.epoch_unix_ns, None);
    assert_eq!(c.unknown_ops, 0);
}

#[test]
fn tencent_cbs_bzip2() {
    let path = format!("{TRACES}/tencent-cbs-sample.csv.bz2");
    let (reqs, vols, c, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Tencent);
    assert_eq!(meta.compression, Compression::Bzip2);
    assert_eq!(reqs.len(), 50_000);
    assert_eq!(vols.len(), 2038);
    // 1538323200,4247200,128,1,1058: sectors, IOType 1 = write.
    assert_eq!(reqs[0], req(0, 0, Op::Write, 4_247_200 * 512, 128 * 512));
    assert_eq!(vols.name(VolumeId(0)), Some("1058"));
    // 1538323200,8526920,128,1,10799
    let last = reqs[49_999];
    assert_eq!(
        (last.time_ns, last.op, last.offset, last.len),
        (0, Op::Write, 8_526_920 * 512, 65_536)
    );
    assert_eq!(vols.name(last.volume), Some("10799"));
    assert_eq!(meta.epoch_unix_ns, Some(1_538_323_200_000_000_000));
    // Rows within a second are unsorted: 1297 rows at 1538323199 precede the first row's second.
    assert_eq!(c.clamped_times, 1297);
    assert_eq!(reqs.iter().filter(|r| r.op == Op::Read).count(), 24_521);
}

#[test]
fn systor17_gzip_with_header() {
    let path = format!("{TRACES}/systor17-sample.csv.gz");
    let (reqs, vols, c, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Systor);
    assert_eq!(meta.compression, Compression::Gzip);
    // 1000 lines: the header and 999 records.
    assert_eq!(reqs.len(), 999);
    assert_eq!(c.lines, 1000);
    assert_eq!(c.skipped_lines, 1);
    assert_eq!(vols.names(), ["0"]);
    // 1456095145.133076000,0.000806000,R,0,899056122368,131072
    assert_eq!(reqs[0], req(0, 0, Op::Read, 899_056_122_368, 131_072));
    assert_eq!(meta.epoch_unix_ns, Some(1_456_095_145_133_076_000));
    // 1456095147.574052000,0.000245000,R,0,4238867714048,4096
    assert_eq!(
        reqs[998],
        req(2_440_976_000, 0, Op::Read, 4_238_867_714_048, 4096)
    );
    assert_eq!(c.clamped_times, 2);
    assert_eq!(reqs.iter().filter(|r| r.op == Op::Write).count(), 173);
}

#[test]
fn blkparse_keeps_one_action_and_skips_summary() {
    let path = format!("{DATA}/sample.blkparse");
    let (reqs, vols, c, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Blkparse);
    assert_eq!(vols.names(), ["8,0", "8,16"]);
    assert_eq!(
        reqs,
        vec![
            req(0, 0, Op::Write, 223_490 * 512, 4096),
            req(103_584, 0, Op::Read, 1000 * 512, 8192),
            req(1_000_000, 1, Op::Flush, 0, 0),
            req(2_500_000, 1, Op::Trim, 4096 * 512, 2048 * 512),
            req(3_000_000, 1, Op::Write, 77 * 512, 512),
            req(6_000_001, 0, Op::Read, 5000 * 512, 256 * 512),
        ]
    );
    assert_eq!(c.unknown_ops, 1);
    assert_eq!(c.unknown_op_names.get("N"), Some(&1));

    let opts = ReadOptions {
        blkparse_action: BlkAction::Complete,
        ..ReadOptions::default()
    };
    let (reqs, ..) = read_all(&path, Some(Format::Blkparse), &opts).unwrap();
    assert_eq!(reqs, vec![req(0, 0, Op::Write, 223_490 * 512, 4096)]);
    let opts = ReadOptions {
        blkparse_action: BlkAction::Issue,
        ..ReadOptions::default()
    };
    let (reqs, ..) = read_all(&path, Some(Format::Blkparse), &opts).unwrap();
    assert_eq!(reqs, vec![req(0, 0, Op::Write, 223_490 * 512, 4096)]);
}

#[test]
fn fiu_process_names_with_spaces() {
    let path = format!("{DATA}/sample.fiu");
    let (reqs, vols, c, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Fiu);
    assert_eq!(vols.names(), ["6:0", "6:1"]);
    assert_eq!(
        reqs,
        vec![
            req(0, 0, Op::Write, 21_367_904 * 512, 4096),
            req(295_230, 0, Op::Write, 21_367_912 * 512, 4096),
            req(2_166_404, 1, Op::Read, 1000 * 512, 8192),
            req(4_166_446, 0, Op::Read, 2008 * 512, 4096),
        ]
    );
    assert_eq!(c.unknown_op_names.get("X"), Some(&1));
}

#[test]
fn fio_iolog_v2_waits_accumulate() {
    let path = format!("{DATA}/sample-v2.iolog");
    let (reqs, vols, c, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::FioIolog);
    assert_eq!(vols.names(), ["/dev/sdb", "/dev/sdc"]);
    assert_eq!(
        reqs,
        vec![
            req(0, 0, Op::Write, 0, 4096),
            req(250_000, 0, Op::Read, 8192, 16_384),
            req(250_000, 1, Op::Trim, 1_048_576, 65_536),
            req(1_250_000, 0, Op::Flush, 0, 0),
            req(1_250_000, 0, Op::Read, 4096, 512),
        ]
    );
    assert_eq!(c.unknown_op_names.get("fadvise"), Some(&1));
}

#[test]
fn fio_iolog_v3_timestamps_in_us() {
    let path = format!("{DATA}/sample-v3.iolog");
    let (reqs, vols, _, _) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(vols.names(), ["/dev/nvme0n1"]);
    assert_eq!(
        reqs,
        vec![
            req(0, 0, Op::Read, 4096, 4096),
            req(12_000, 0, Op::Write, 1 << 30, 131_072),
            req(1_000_012_000, 0, Op::Trim, 0, 1 << 20),
            req(1_000_085_000, 0, Op::Flush, 0, 0),
        ]
    );
}

#[test]
fn spc_lba_sectors_size_bytes() {
    let path = format!("{DATA}/sample.spc");
    let (reqs, vols, _, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Spc);
    assert_eq!(reqs.len(), 5);
    assert_eq!(vols.names(), ["0", "1", "2"]);
    assert_eq!(reqs[0], req(0, 0, Op::Write, 20_941_264 * 512, 8192));
    assert_eq!(reqs[3], req(6_343_000, 2, Op::Read, 3_435_888 * 512, 512));
    assert_eq!(reqs[4], req(8_294_000, 0, Op::Read, 20_939_856 * 512, 4096));
    assert_eq!(meta.epoch_unix_ns, None);
}

#[test]
fn alibaba_bytes_and_us() {
    let path = format!("{DATA}/sample.alibaba.csv");
    let (reqs, vols, _, meta) = read_all(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(meta.format, Format::Alibaba);
    assert_eq!(vols.names(), ["419", "20"]);
    assert_eq!(reqs.len(), 4);
    assert_eq!(reqs[0], req(0, 0, Op::Write, 1_801_400_320, 4096));
    assert_eq!(reqs[3], req(939_000, 0, Op::Write, 1_801_400_320, 4096));
    assert_eq!(meta.epoch_unix_ns, Some(1_577_808_000_000_061_000));
}

#[test]
fn generic_csv_mapping() {
    let path = format!("{DATA}/sample-generic.tsv");
    let spec: CsvSpec =
        "time=0:ms,volume=1,op=2,offset=3:4k,len=4:4k,read=RD,write=WR,header,delim=tab"
            .parse()
            .unwrap();
    let opts = ReadOptions {
        csv: Some(spec),
        ..ReadOptions::default()
    };
    let (reqs, vols, _, _) = read_all(&path, Some(Format::Csv), &opts).unwrap();
    assert_eq!(vols.names(), ["lunA", "lunB"]);
    assert_eq!(
        reqs,
        vec![
            req(0, 0, Op::Read, 40_960, 4096),
            req(250_500_000, 1, Op::Write, 81_920, 8192),
            req(2_000_000_000, 0, Op::Read, 122_880, 16_384),
        ]
    );
    // Without a mapping, csv is refused with a message saying what is missing.
    let e = read_all(&path, Some(Format::Csv), &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--csv-map"), "{e}");
}

#[test]
fn unknown_content_is_an_error_naming_the_file() {
    let path = format!("{DATA}/../fixtures.rs");
    let e = read_all(&path, None, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fixtures.rs") && e.contains("cannot detect"),
        "{e}"
    );
}
