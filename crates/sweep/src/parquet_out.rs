//! `results.parquet`: the same tidy table as `results.csv`, typed. A column whose every present
//! value parses as a number is a DOUBLE column; the rest are UTF-8 strings; missing cells are
//! nulls. Written with the `parquet` crate's low-level writer (no arrow), zstd-compressed.

use crate::results::{tidy_table, ResultLine};
use crate::SweepError;
use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::path::Path;
use std::sync::Arc;

/// Writes the tidy table of `lines` to `path` (atomically: a temporary file is renamed).
pub fn write_parquet(lines: &[ResultLine], path: &Path) -> Result<(), SweepError> {
    let (header, rows) = tidy_table(lines);
    let err = |e: parquet::errors::ParquetError| SweepError::Io {
        path: path.into(),
        source: std::io::Error::other(e.to_string()),
    };
    let numeric: Vec<bool> = (0..header.len())
        .map(|c| {
            let mut present = rows.iter().filter_map(|r| r[c].as_deref()).peekable();
            present.peek().is_some() && present.all(|v| v.parse::<f64>().is_ok())
        })
        .collect();
    let fields = header
        .iter()
        .zip(&numeric)
        .map(|(name, &num)| {
            let b = Type::primitive_type_builder(
                name,
                if num {
                    Physical::DOUBLE
                } else {
                    Physical::BYTE_ARRAY
                },
            )
            .with_repetition(Repetition::OPTIONAL);
            let b = if num {
                b
            } else {
                b.with_logical_type(Some(LogicalType::String))
            };
            b.build().map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let schema = Arc::new(
        Type::group_type_builder("sweep_results")
            .with_fields(fields)
            .build()
            .map_err(err)?,
    );
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let tmp = path.with_extension("parquet.tmp");
    let file = std::fs::File::create(&tmp).map_err(|source| SweepError::Io {
        path: tmp.clone(),
        source,
    })?;
    let mut writer = SerializedFileWriter::new(file, schema, Arc::new(props)).map_err(err)?;
    let mut group = writer.next_row_group().map_err(err)?;
    for (c, &num) in numeric.iter().enumerate() {
        let mut col = group
            .next_column()
            .map_err(err)?
            .expect("one writer per schema column");
        let defs: Vec<i16> = rows.iter().map(|r| r[c].is_some() as i16).collect();
        if num {
            let vals: Vec<f64> = rows
                .iter()
                .filter_map(|r| r[c].as_deref())
                .map(|v| v.parse().unwrap_or(f64::NAN))
                .collect();
            col.typed::<DoubleType>()
                .write_batch(&vals, Some(&defs), None)
                .map_err(err)?;
        } else {
            let vals: Vec<ByteArray> = rows
                .iter()
                .filter_map(|r| r[c].as_deref())
                .map(ByteArray::from)
                .collect();
            col.typed::<ByteArrayType>()
                .write_batch(&vals, Some(&defs), None)
                .map_err(err)?;
        }
        col.close().map_err(err)?;
    }
    group.close().map_err(err)?;
    writer.close().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|source| SweepError::Io {
        path: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::read_results;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    #[test]
    fn parquet_holds_the_csv_table_typed() {
        let dir = tempfile::tempdir().unwrap();
        let jsonl = dir.path().join("results.jsonl");
        let line = |point: &str, iops: f64, status: &str| {
            serde_json::json!({
                "point": point, "sweep": "s", "name": format!("d-{point}"), "workload": "w", "rep": 0,
                "seed": 1, "index": 0, "default": point == "a", "axes": {"cache.line_size": "4KiB"},
                "labels": [["line_size", "4KiB"]], "status": status, "elapsed_s": 0.5,
                "record": {"metrics": {"iops": iops, "latency_us": {"all": {"p99": 12.5}}}}
            })
            .to_string()
        };
        std::fs::write(
            &jsonl,
            format!("{}\n{}\n", line("a", 1000.0, "ok"), line("b", 2500.0, "ok")),
        )
        .unwrap();
        let lines = read_results(&jsonl).unwrap().lines;
        let out = dir.path().join("results.parquet");
        write_parquet(&lines, &out).unwrap();

        let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
        let mut iops = Vec::new();
        for row in reader.get_row_iter(None).unwrap() {
            for (name, field) in row.unwrap().get_column_iter() {
                match (name.as_str(), field) {
                    ("metrics.iops", Field::Double(v)) => iops.push(*v),
                    ("metrics.iops", other) => panic!("iops stored as {other:?}"),
                    ("line_size", Field::Str(s)) => assert_eq!(s, "4KiB"),
                    _ => {}
                }
            }
        }
        iops.sort_by(f64::total_cmp);
        assert_eq!(iops, vec![1000.0, 2500.0]);
    }
}
