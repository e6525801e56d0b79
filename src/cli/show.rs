//! `tunelab show RUN`: one stored run, with the machine it was recorded on.

use super::runs::clean;
use super::Out;
use crate::model::run::Run;
use crate::report::runview;
use crate::store::Store;
use crate::study;
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Run id, unique prefix, `last` or `last~N`.
    pub(crate) run: String,
}

pub(crate) fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let run = store.load(&args.run)?;
    if out.json {
        out.json_data(&run)?;
    } else {
        out.data(&render(&run, out.term))?;
    }
    Ok(0)
}

/// The run view, with every text that came from the user or another machine
/// made safe for the terminal, and the machine's name and id after the first line.
pub(crate) fn render(run: &Run, term: crate::report::table::Terminal) -> String {
    let mut safe = run.clone();
    safe.label = clean(&run.label);
    for v in safe.environment.values_mut() {
        *v = clean(v);
    }
    safe.warnings = run.warnings.iter().map(|w| clean(w)).collect();
    for r in &mut safe.results {
        r.notes = r.notes.iter().map(|n| clean(n)).collect();
        for v in r.params.values_mut() {
            if let crate::engine::ParamValue::Text(t) = v {
                *t = clean(t);
            }
        }
    }
    let mut text = runview::render(&safe, term);
    // A study's verdicts and the time each key issue took, as `study`
    // printed them when it ran (a board log that kept only the run id can
    // still say where a slow study's time went).
    if let Some(s) = &safe.study {
        text.push_str(&study::summary_table(s, term));
        text.push('\n');
        if let Some(times) = study::step_times(s, term) {
            text.push_str(&times);
            text.push('\n');
        }
    }
    if let Some(d) = &run.diagnosis {
        // Process names and commands come from another machine: cleaned
        // line by line so the layout's newlines stay.
        let d = crate::report::diagnosis::text(d, term);
        for line in d.lines() {
            text.push_str(&clean(line));
            text.push('\n');
        }
    }
    let env = &safe.environment;
    let host = match (env.get("fleet.host"), env.get("host.name")) {
        // The inventory name `compare` and `history` use, and the host name.
        (Some(f), Some(h)) if f != h => format!("{f} (host name {h})"),
        (Some(f), _) => f.clone(),
        (None, Some(h)) => h.clone(),
        (None, None) => "unknown host".into(),
    };
    let id = env
        .get("machine.id")
        .map(|id| format!(" · machine id {}", id.chars().take(12).collect::<String>()))
        .unwrap_or_default();
    let line = format!("recorded on: {host}{id}\n");
    match text.split_once('\n') {
        Some((first, rest)) => format!("{first}\n{line}{rest}"),
        None => format!("{text}\n{line}"),
    }
}
