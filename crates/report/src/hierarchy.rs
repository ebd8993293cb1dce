//! Cache hierarchies (docs/design.md §4.7) in a report: the records `tiercache hierarchy --json`
//! writes (`"kind": "hierarchy"`), such as the exclusive-caching experiment's.
//!
//! A run's name is read as `GROUP/DESIGN`: everything before the last `/` is the setting the
//! designs are compared in (e.g. `designs/zipf/-`), the last part the design
//! (`LRU-MRU-demote`). Each group gets a table (where requests were served, level by level,
//! demotes, link use, mean and p99 latency, the mean against the group's first design) and a
//! bar chart of mean latency. Groups that differ only in a last, numeric part of the group
//! name (`bw/zipf/1G`, `bw/zipf/100M`…: a link bandwidth; `clients/shared/1`, `…/8`: a client
//! count) also form a family, drawn as mean latency against that number, one line per design.

use crate::data::{lookup, lookup_f64};
use crate::svg::{self, esc, fmt_num, Bar, Role, Scale, Series};
use crate::Plot;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// What the hierarchy section adds to a page.
pub(crate) struct Section {
    /// Table-of-contents entry (`<li>`): the section and its family plots (the settings
    /// are too many to list).
    pub toc: String,
    /// The HTML.
    pub body: String,
    /// Its plots (also inlined in `body`).
    pub plots: Vec<Plot>,
}

/// One run, as the section reads it.
struct Row<'a> {
    design: &'a str,
    rec: &'a Value,
}

/// Splits `name` into (group, design) at its last `/`.
fn split(name: &str) -> (&str, &str) {
    name.rsplit_once('/').unwrap_or(("all", name))
}

/// A number written with an optional SI suffix and unit, as in run names: `1G`, `300M`,
/// `10Mbit`, `8`. `None` for anything else (`-`, `disjoint`).
pub(crate) fn setting_value(text: &str) -> Option<f64> {
    let t = text.trim_end_matches("bit/s").trim_end_matches("bit");
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(end);
    let v: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return None,
    };
    Some(v * scale)
}

fn mean_us(rec: &Value) -> Option<f64> {
    lookup_f64(rec, "result.latency_us.mean")
}

/// Builds the section from the hierarchy records, in file order; `next_id` makes plot ids.
pub(crate) fn section(records: &[Value], next_id: &mut dyn FnMut(&str) -> String) -> Section {
    let mut groups: Vec<(&str, Vec<Row<'_>>)> = Vec::new();
    for rec in records {
        let name = rec.get("name").and_then(Value::as_str).unwrap_or("run");
        let (group, design) = split(name);
        match groups.iter_mut().find(|g| g.0 == group) {
            Some(g) => g.1.push(Row { design, rec }),
            None => groups.push((group, vec![Row { design, rec }])),
        }
    }
    let mut out = Section {
        toc: "<li><a href=\"#hierarchies\">Cache hierarchies</a><ul>".into(),
        body: format!(
            "<h2 id=\"hierarchies\">Cache hierarchies</h2><p>{} runs in {} settings. Each row \
             is a design; the level columns are the share of all requests each level served \
             (they sum to 1 with the backend's).</p>",
            records.len(),
            groups.len()
        ),
        plots: Vec::new(),
    };
    for (gi, (group, rows)) in groups.iter().enumerate() {
        // Numbered, as workload anchors are: distinct groups can share a slug.
        let anchor = format!("hg{gi}-{}", crate::html::slug(group));
        let _ = write!(out.toc, "<li><a href=\"#{anchor}\">{}</a></li>", esc(group));
        let _ = write!(out.body, "<h3 id=\"{anchor}\">{}</h3>", esc(group));
        table(&mut out.body, rows);
        if let Some(p) = latency_bars(next_id(&format!("{group} latency")), group, rows) {
            figure(&mut out, p);
        }
    }
    // Families: groups that differ only in a numeric last part.
    let mut families: BTreeMap<&str, Vec<(f64, &Vec<Row<'_>>)>> = BTreeMap::new();
    for (group, rows) in &groups {
        if let Some((family, last)) = group.rsplit_once('/') {
            if let Some(x) = setting_value(last) {
                families.entry(family).or_default().push((x, rows));
            }
        }
    }
    for (family, mut members) in families {
        if members.len() < 2 {
            continue;
        }
        members.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut by_design: Vec<Series> = Vec::new();
        for (x, rows) in &members {
            for r in rows.iter() {
                let Some(y) = mean_us(r.rec) else { continue };
                match by_design.iter_mut().find(|s| s.name == r.design) {
                    Some(s) => s.points.push((*x, y)),
                    None => by_design.push(Series {
                        name: r.design.to_string(),
                        points: vec![(*x, y)],
                    }),
                }
            }
        }
        let (lo, hi) = (members[0].0, members[members.len() - 1].0);
        let x_scale = if lo > 0.0 && hi / lo >= 10.0 {
            Scale::Log
        } else {
            Scale::Linear
        };
        let id = next_id(&format!("{family} family"));
        let title = format!("{family}: mean latency by setting");
        let svg = svg::line_chart(
            &id,
            &title,
            "setting (the last part of the run name)",
            "mean latency (µs)",
            &by_design,
            x_scale,
            Scale::Log,
        );
        let _ = write!(
            out.toc,
            "<li><a href=\"#fig-{id}\">{}</a></li>",
            esc(&title)
        );
        figure(&mut out, Plot { id, title, svg });
    }
    out.toc.push_str("</ul></li>");
    out
}

fn figure(out: &mut Section, p: Plot) {
    let caption = esc(&p.title);
    crate::html::figure(&mut out.body, &mut out.plots, p, &caption);
}

/// Level columns of a group: client levels (not shared) summed into one column, then every
/// shared level by name (the last of them the backend).
fn level_columns(rows: &[Row<'_>]) -> Vec<String> {
    let mut cols = Vec::new();
    let mut clients = false;
    for r in rows {
        for l in levels(r.rec) {
            if l.get("shared").and_then(Value::as_bool) == Some(false) {
                clients = true;
            } else if let Some(n) = l.get("name").and_then(Value::as_str) {
                if !cols.iter().any(|c| c == n) {
                    cols.push(n.to_string());
                }
            }
        }
    }
    if clients {
        cols.insert(0, "clients".into());
    }
    cols
}

fn levels(rec: &Value) -> &[Value] {
    lookup(rec, "result.levels")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The share of requests served by column `col` of a run.
fn served_share(rec: &Value, col: &str) -> Option<f64> {
    let ls = levels(rec);
    let pick = |l: &&Value| {
        if col == "clients" {
            l.get("shared").and_then(Value::as_bool) == Some(false)
        } else {
            l.get("shared").and_then(Value::as_bool) != Some(false)
                && l.get("name").and_then(Value::as_str) == Some(col)
        }
    };
    let picked: Vec<&Value> = ls.iter().filter(pick).collect();
    (!picked.is_empty()).then(|| {
        picked
            .iter()
            .filter_map(|l| lookup_f64(l, "hit_fraction"))
            .sum()
    })
}

fn sum_levels(rec: &Value, key: &str) -> f64 {
    levels(rec).iter().filter_map(|l| lookup_f64(l, key)).sum()
}

fn table(body: &mut String, rows: &[Row<'_>]) {
    let cols = level_columns(rows);
    let _ = write!(body, "<table><tr><th>design</th>");
    for c in &cols {
        let _ = write!(body, "<th>{}</th>", esc(c));
    }
    body.push_str(
        "<th>demotes sent</th><th>accepted</th><th>already held</th><th>rejected</th>\
         <th>link utilisation</th><th>mean µs</th><th>p99 µs</th><th>mean × first</th></tr>",
    );
    let first = rows.first().and_then(|r| mean_us(r.rec));
    for r in rows {
        let _ = write!(body, "<tr><td>{}</td>", esc(r.design));
        for c in &cols {
            let cell = served_share(r.rec, c).map_or(String::new(), |v| format!("{v:.3}"));
            let _ = write!(body, "<td>{cell}</td>");
        }
        for key in [
            "demotes_sent",
            "demotes_accepted",
            "demotes_already_held",
            "demotes_rejected",
        ] {
            let _ = write!(body, "<td>{}</td>", fmt_num(sum_levels(r.rec, key)));
        }
        // The busiest link: the simulator books a client's link on its lowest own level, or
        // on the client when it has no level of its own.
        let clients = lookup(r.rec, "result.clients").and_then(Value::as_array);
        let link = levels(r.rec)
            .iter()
            .chain(clients.into_iter().flatten())
            .filter_map(|x| lookup_f64(x, "link.utilisation"))
            .reduce(f64::max);
        let _ = write!(
            body,
            "<td>{}</td>",
            link.map_or("–".to_string(), |u| format!("{u:.2}"))
        );
        let mean = mean_us(r.rec);
        let p99 = lookup_f64(r.rec, "result.latency_us.p99");
        let ratio = match (mean, first) {
            (Some(m), Some(f)) if f > 0.0 => format!("{:.2}", m / f),
            _ => String::new(),
        };
        let _ = write!(
            body,
            "<td>{}</td><td>{}</td><td>{ratio}</td></tr>",
            mean.map_or(String::new(), fmt_num),
            p99.map_or(String::new(), fmt_num)
        );
    }
    body.push_str("</table>");
}

fn latency_bars(id: String, group: &str, rows: &[Row<'_>]) -> Option<Plot> {
    let values: Vec<(&str, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.design, mean_us(r.rec)?)))
        .collect();
    if values.len() < 2 {
        return None;
    }
    let best = values.iter().map(|v| v.1).fold(f64::INFINITY, f64::min);
    let worst = values.iter().map(|v| v.1).fold(f64::NEG_INFINITY, f64::max);
    let bars: Vec<Bar> = values
        .iter()
        .map(|&(label, v)| Bar {
            label: label.to_string(),
            value: v,
            lo: v,
            hi: v,
            role: if v == best {
                Role::Best
            } else if v == worst {
                Role::Worst
            } else {
                Role::Plain
            },
        })
        .collect();
    let title = format!("{group}: mean latency by design");
    let svg = svg::bar_chart(&id, &title, "mean latency (µs)", &bars);
    Some(Plot { id, title, svg })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_with_si_suffixes_and_units() {
        assert_eq!(setting_value("1G"), Some(1e9));
        assert_eq!(setting_value("300M"), Some(3e8));
        assert_eq!(setting_value("10Mbit"), Some(1e7));
        assert_eq!(setting_value("8"), Some(8.0));
        assert_eq!(setting_value("-"), None);
        assert_eq!(setting_value("disjoint"), None);
        assert_eq!(setting_value("3X"), None);
    }

    fn rec(name: &str, mean: f64, client: f64, array: f64) -> Value {
        serde_json::json!({
            "kind": "hierarchy",
            "name": name,
            "result": {
                "latency_us": { "mean": mean, "p99": mean * 2.0 },
                "levels": [
                    { "name": "h.client", "shared": false, "hit_fraction": client, "demotes_sent": 5,
                      "link": { "utilisation": 0.25 } },
                    { "name": "array", "shared": true, "hit_fraction": array, "demotes_accepted": 4, "demotes_already_held": 1 },
                    { "name": "backend", "shared": true, "hit_fraction": 1.0 - client - array }
                ],
                "clients": [ { "name": "h", "link": null } ]
            }
        })
    }

    #[test]
    fn groups_tables_bars_and_families_come_from_the_names() {
        let recs = vec![
            rec("bw/zipf/1G/LRU-LRU-none", 900.0, 0.5, 0.1),
            rec("bw/zipf/1G/LRU-MRU-demote", 700.0, 0.5, 0.3),
            rec("bw/zipf/10M/LRU-LRU-none", 950.0, 0.5, 0.1),
            rec("bw/zipf/10M/LRU-MRU-demote", 1200.0, 0.5, 0.3),
            rec("designs/random/-/LRU-LRU-none", 2000.0, 0.5, 0.08),
        ];
        let mut n = 0;
        let s = section(&recs, &mut |w| {
            n += 1;
            format!("h{n}-{}", crate::html::slug(w))
        });
        // Three groups, each with a table; bars where a group has two designs (two of them);
        // one family (bw/zipf over 1G and 10M), none for designs/random.
        assert_eq!(s.body.matches("<table>").count(), 3);
        assert_eq!(s.plots.len(), 3);
        assert!(s
            .plots
            .iter()
            .any(|p| p.title == "bw/zipf: mean latency by setting"));
        // Shares served by client, array and backend; demotes summed over levels; the mean
        // against the group's first design.
        assert!(s
            .body
            .contains("<td>0.500</td><td>0.300</td><td>0.200</td>"));
        assert!(s
            .body
            .contains("<td>5</td><td>4</td><td>1</td><td>0</td><td>0.25</td>"));
        assert!(s.body.contains("<td>0.78</td></tr>"), "700/900");
        assert!(s.body.contains("<td>1.26</td></tr>"), "1200/950");
        // A client with no level of its own has its link on the client record.
        let mut r = rec("one/random/-/LRU", 900.0, 0.5, 0.1);
        r["result"]["levels"][0]["link"] = Value::Null;
        r["result"]["clients"][0]["link"] = serde_json::json!({ "utilisation": 0.6 });
        let s = section(&[r], &mut |w| crate::html::slug(w));
        assert!(s.body.contains("<td>0</td><td>0.60</td>"), "{}", s.body);
    }
}
