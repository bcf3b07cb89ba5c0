//! Loop markers in phase output, per Avenor's grammar: a whole line
//! `<|workflow: exit|abort|continue [| label]|>`, case-insensitive, ignored inside ``` and ~~~
//! fences and inside prose; unknown directives ignored; most severe wins (abort > exit >
//! continue), the first one on a tie.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Directive {
    Continue,
    Exit,
    Abort,
}

impl Directive {
    pub fn as_str(self) -> &'static str {
        match self {
            Directive::Continue => "continue",
            Directive::Exit => "exit",
            Directive::Abort => "abort",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub directive: Directive,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// 1-based line number in the phase's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

const OPEN: &str = "<|workflow:";
const CLOSE: &str = "|>";

/// Characters of a marker's label, or of a `<|result: ...|>`, kept: they go into the log's
/// `phase_finished` (and a label into the sentinel), whose lines its readers cap.
pub const MAX_LABEL: usize = 1000;
/// Markers a phase's output keeps in order; past them only one more severe than every marker
/// kept is (so the winner is still the one all of them give).
pub const MAX_MARKERS: usize = 64;

fn capped(text: &str) -> String {
    match text.char_indices().nth(MAX_LABEL) {
        Some((end, _)) => text[..end].to_string(),
        None => text.to_string(),
    }
}

/// Reads one line (without its newline) as a marker, ignoring fences.
pub fn parse_marker(line: &str) -> Option<Marker> {
    let t = line.trim();
    let head = t.get(..OPEN.len())?;
    if !head.eq_ignore_ascii_case(OPEN) || !t.ends_with(CLOSE) || t.len() < OPEN.len() + 2 {
        return None;
    }
    // The label runs to the last `|>`, so it may itself hold `|` and `|>`.
    let inner = &t[OPEN.len()..t.len() - CLOSE.len()];
    let (word, label) = match inner.split_once('|') {
        Some((w, l)) => (w, Some(l.trim())),
        None => (inner, None),
    };
    let directive = match word.trim().to_ascii_lowercase().as_str() {
        "continue" => Directive::Continue,
        "exit" => Directive::Exit,
        "abort" => Directive::Abort,
        _ => return None,
    };
    Some(Marker {
        directive,
        label: label.filter(|l| !l.is_empty()).map(capped),
        line: None,
    })
}

/// The value of a whole-line `<|name: value|>` tag (name case-insensitive), trimmed.
pub fn tag<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let t = line.trim();
    let inner = t.strip_prefix("<|")?.strip_suffix("|>")?;
    let (n, v) = inner.split_once(':')?;
    n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
}

/// A fence opener or closer: up to three spaces, then three or more backticks or tildes.
fn fence(line: &str) -> Option<(u8, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line.as_bytes()[indent..];
    let ch = *rest.first().filter(|c| matches!(c, b'`' | b'~'))?;
    let run = rest.iter().take_while(|&&c| c == ch).count();
    (run >= 3).then_some((ch, run))
}

/// Scans a phase's output line by line as it streams.
#[derive(Debug, Default, Clone)]
pub struct MarkerScanner {
    open_fence: Option<(u8, usize)>,
    lines: u64,
    pub seen: Vec<Marker>,
    /// The last `<|score: x|>` marker: a phase's self-reported score.
    pub score: Option<f64>,
    /// The last `<|result: text|>` marker: the string branches route on.
    pub result: Option<String>,
    /// The last whole-line JSON object with a `score` or `rule_results` key.
    pub evaluation: Option<String>,
}

impl MarkerScanner {
    /// Feeds one complete line (a trailing `\r` is ignored).
    pub fn line(&mut self, line: &str) {
        self.lines += 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some((ch, len)) = fence(line) {
            match self.open_fence {
                None => self.open_fence = Some((ch, len)),
                // A closer is the same character, at least as long, with nothing after it.
                Some((och, olen)) if och == ch && len >= olen && line.trim().len() == len => {
                    self.open_fence = None
                }
                Some(_) => {}
            }
            return;
        }
        if self.open_fence.is_some() {
            return;
        }
        if let Some(mut m) = parse_marker(line) {
            m.line = Some(self.lines);
            let outranks = || winner(&self.seen).is_none_or(|w| m.directive > w.directive);
            if self.seen.len() < MAX_MARKERS || outranks() {
                self.seen.push(m);
            }
        } else if let Some(v) = tag(line, "score") {
            // A score is a fraction: anything outside 0..=1 is not one.
            if let Some(x) = v.parse::<f64>().ok().filter(|x| (0.0..=1.0).contains(x)) {
                self.score = Some(x);
            }
        } else if let Some(v) = tag(line, "result") {
            self.result = Some(capped(v));
        } else {
            let t = line.trim();
            if t.starts_with('{')
                && t.ends_with('}')
                && (t.contains("\"score\"") || t.contains("\"rule_results\""))
                && serde_json::from_str::<serde_json::Value>(t).is_ok_and(|v| v.is_object())
            {
                self.evaluation = Some(t.to_string());
            }
        }
    }

    /// The marker the loop acts on: the most severe, the first on a tie.
    pub fn winner(&self) -> Option<&Marker> {
        winner(&self.seen)
    }
}

pub fn winner(seen: &[Marker]) -> Option<&Marker> {
    seen.iter()
        .fold(None, |best: Option<&Marker>, m| match best {
            Some(b) if b.directive >= m.directive => Some(b),
            _ => Some(m),
        })
}

/// Scans a whole text (for tests and after-the-fact use).
pub fn scan(text: &str) -> MarkerScanner {
    let mut s = MarkerScanner::default();
    text.lines().for_each(|l| s.line(l));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A phase printing markers without end keeps a bounded list whose winner is the one all
    /// of them give, and labels cut to `MAX_LABEL` characters (the runner wrote a 36 MB
    /// `phase_finished` its own readers skipped).
    #[test]
    fn markers_and_labels_are_bounded_and_the_winner_kept() {
        let mut text = "<|workflow: continue | keep going|>\n".repeat(10_000);
        text += "<|workflow: exit | first exit|>\n<|workflow: exit | later exit|>\n";
        text += &"<|workflow: continue|>\n".repeat(100);
        text += &format!("<|workflow: abort | {}|>\n", "é".repeat(5000));
        text += &format!("<|result: {}|>\n", "r".repeat(5000));
        let s = scan(&text);
        assert!(s.seen.len() <= MAX_MARKERS + 2, "{}", s.seen.len());
        let w = s.winner().unwrap();
        assert_eq!(w.directive, Directive::Abort);
        assert_eq!(w.label.as_ref().map(|l| l.chars().count()), Some(MAX_LABEL));
        assert_eq!(w.line, Some(10_103));
        assert_eq!(s.result.map(|r| r.len()), Some(MAX_LABEL));
        // Past the cap, an exit still outranks the continues kept, and the first exit wins.
        let s = scan(
            &("<|workflow: continue|>\n".repeat(100)
                + "<|workflow: exit | a|>\n<|workflow: exit | b|>\n"),
        );
        assert_eq!(s.winner().and_then(|m| m.label.as_deref()), Some("a"));
    }

    proptest! {
        /// Any label without a newline round-trips through a marker line, in any letter case.
        #[test]
        fn labels_round_trip(label in "[^\\r\\n]{0,40}", upper: bool, pad in " {0,3}") {
            let word = if upper { "ABORT" } else { "abort" };
            let line = format!("{pad}<|workflow: {word} | {label}|>{pad}");
            let m = parse_marker(&line).expect("a marker");
            prop_assert_eq!(m.directive, Directive::Abort);
            let want = label.trim();
            prop_assert_eq!(m.label.as_deref(), (!want.is_empty()).then_some(want));
        }

        /// Whatever surrounds it, a marker between fences never counts, and no text panics.
        #[test]
        fn fenced_markers_never_count(before in "[a-z \\n]{0,30}", fence in prop::sample::select(vec!["```", "~~~", "````"]), inner in "[a-z <|>:\\n]{0,60}") {
            let text = format!("{before}\n{fence}\n<|workflow: exit|>\n{inner}\n");
            let s = scan(&text);
            prop_assert!(s.seen.iter().all(|m| m.line != Some(text.lines().position(|l| l == "<|workflow: exit|>").unwrap() as u64 + 1)));
        }
    }

    fn win(text: &str) -> Option<(Directive, Option<String>)> {
        scan(text).winner().map(|m| (m.directive, m.label.clone()))
    }

    #[test]
    fn whole_line_case_insensitive_with_labels() {
        assert_eq!(win("<|workflow: exit|>"), Some((Directive::Exit, None)));
        assert_eq!(
            win("  <|WORKFLOW: Exit | tests green|>  "),
            Some((Directive::Exit, Some("tests green".into())))
        );
        assert_eq!(
            win("<|workflow:abort| a | b |> c|>"),
            Some((Directive::Abort, Some("a | b |> c".into())))
        );
        assert_eq!(win("<|workflow: exit | |>"), Some((Directive::Exit, None)));
    }

    #[test]
    fn prose_fences_and_unknown_words_are_ignored() {
        assert_eq!(win("say <|workflow: exit|> when done"), None);
        assert_eq!(win("<|workflow: exit|> now"), None);
        assert_eq!(win("<|workflow: finish|>"), None);
        assert_eq!(win("<|workflow: exit"), None);
        assert_eq!(win("```\n<|workflow: exit|>\n```"), None);
        assert_eq!(win("~~~md\n<|workflow: abort|>\n~~~"), None);
        // A ``` line does not close a ~~~ fence; a longer closer does close a shorter opener.
        assert_eq!(win("~~~\n```\n<|workflow: exit|>\n~~~"), None);
        assert_eq!(
            win("```\nx\n`````\n<|workflow: exit|>"),
            Some((Directive::Exit, None))
        );
        // A fence line with an info string does not close an open fence.
        assert_eq!(win("```\n```rust\n<|workflow: exit|>"), None);
        // Four spaces of indent is code, not a fence.
        assert_eq!(
            win("    ```\n<|workflow: exit|>"),
            Some((Directive::Exit, None))
        );
    }

    #[test]
    fn most_severe_wins_first_on_tie() {
        assert_eq!(
            win("<|workflow: exit|a|>\n<|workflow: abort|b|>\n<|workflow: continue|>"),
            Some((Directive::Abort, Some("b".into())))
        );
        assert_eq!(
            win("<|workflow: exit|first|>\n<|workflow: exit|second|>"),
            Some((Directive::Exit, Some("first".into())))
        );
        assert_eq!(
            win("<|workflow: continue|>"),
            Some((Directive::Continue, None))
        );
        let s = scan("a\r\n<|workflow: exit|x|>\r\n");
        assert_eq!(s.seen[0].line, Some(2));
    }

    #[test]
    fn score_result_and_json_evaluations_are_whole_lines_outside_fences() {
        let s = scan(
            "the score: 0.5 is prose\n<|score: 0.4|>\n  <|SCORE: 0.82|>  \n<|score: high|>\n\
             <|result: tool-call|>\n```\n<|score: 0.1|>\n{\"score\": 0.1}\n```\n\
             {\"score\": 0.7, \"passed\": false}\n{\"score\": broken}\nsay <|result: no|>\n",
        );
        assert_eq!(s.score, Some(0.82));
        assert_eq!(s.result.as_deref(), Some("tool-call"));
        assert_eq!(
            s.evaluation.as_deref(),
            Some("{\"score\": 0.7, \"passed\": false}")
        );
        assert_eq!(tag("<|result:  a:b |>", "result"), Some("a:b"));
        assert_eq!(tag("<|workflow: exit|>", "result"), None);
    }
}
