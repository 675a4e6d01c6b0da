//! Parsing of einsum strings into a [`Spec`]: syntax, output validation, numpy's implicit
//! output rule. Shapes are not looked at here (see [`super::bind`]).

use crate::error::{Error, Result};

/// One operand's subscripts as written.
///
/// ```
/// let spec = ttgt::einsum::parse("a...b,b").unwrap();
/// let t = &spec.inputs()[0];
/// assert_eq!(t.letters(), &['a', 'b']);
/// assert_eq!(t.ellipsis(), Some(1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    letters: Vec<char>,
    positions: Vec<usize>,
    ellipsis: Option<usize>,
}

impl Term {
    /// The letters, in order, without the ellipsis.
    pub fn letters(&self) -> &[char] {
        &self.letters
    }

    /// Position of each letter in the spec string (in characters, from 0).
    pub fn positions(&self) -> &[usize] {
        &self.positions
    }

    /// Where the `...` stands: the number of letters before it, or `None`.
    pub fn ellipsis(&self) -> Option<usize> {
        self.ellipsis
    }

    /// The subscripts as text, e.g. `"a...b"`.
    ///
    /// ```
    /// let spec = ttgt::einsum::parse(" a b ... ").unwrap();
    /// assert_eq!(spec.inputs()[0].to_text(), "ab...");
    /// ```
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (i, c) in self.letters.iter().enumerate() {
            if self.ellipsis == Some(i) {
                s.push_str("...");
            }
            s.push(*c);
        }
        if self.ellipsis == Some(self.letters.len()) {
            s.push_str("...");
        }
        s
    }

    fn empty() -> Term {
        Term {
            letters: Vec::new(),
            positions: Vec::new(),
            ellipsis: None,
        }
    }
}

/// A parsed einsum spec: input terms and the output term (explicit, or built by numpy's
/// implicit rule: `...` first, then the letters that appear exactly once, in ASCII order).
///
/// ```
/// let spec = ttgt::einsum::parse("ij,jk").unwrap();
/// assert_eq!(spec.output().letters(), &['i', 'k']);
/// assert!(!spec.has_explicit_output());
/// assert_eq!(spec.to_string(), "ij,jk->ik");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    text: String,
    inputs: Vec<Term>,
    output: Term,
    explicit: bool,
}

impl Spec {
    /// The string the spec was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The input terms, one per operand.
    pub fn inputs(&self) -> &[Term] {
        &self.inputs
    }

    /// The output term.
    pub fn output(&self) -> &Term {
        &self.output
    }

    /// Whether the string had `->`.
    pub fn has_explicit_output(&self) -> bool {
        self.explicit
    }
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ins: Vec<String> = self.inputs.iter().map(Term::to_text).collect();
        write!(f, "{}->{}", ins.join(","), self.output.to_text())
    }
}

/// Parses an einsum spec such as `"abcd,dbef->acef"`, `"ij,jk"`, `"ii"` or `"...ij,...jk->...ik"`.
/// Letters are `a-z` and `A-Z`; spaces may stand anywhere.
///
/// ```
/// use ttgt::einsum::parse;
/// assert_eq!(parse("ba,ab").unwrap().output().letters(), &[] as &[char]);
/// assert_eq!(parse("b,a").unwrap().output().letters(), &['a', 'b']);
/// assert!(parse("ij,jk->ii").is_err());
/// ```
pub fn parse(text: &str) -> Result<Spec> {
    let chars: Vec<char> = text.chars().collect();
    let malformed = |pos: usize, reason: &str| Error::Malformed {
        spec: text.to_string(),
        pos,
        reason: reason.to_string(),
    };
    let mut inputs: Vec<Term> = Vec::new();
    let mut current = Term::empty();
    let mut output: Option<Term> = None; // Some once "->" has been read
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_ascii_alphabetic() => {
                current.letters.push(c);
                current.positions.push(i);
            }
            c if c.is_whitespace() => {}
            ',' => {
                if output.is_some() {
                    return Err(malformed(i, "',' after '->': the output is a single term"));
                }
                inputs.push(std::mem::replace(&mut current, Term::empty()));
            }
            '-' => {
                if chars.get(i + 1) != Some(&'>') {
                    return Err(malformed(i, "'-' must be followed by '>'"));
                }
                if output.is_some() {
                    return Err(malformed(i, "a second '->' (a spec has one output)"));
                }
                inputs.push(std::mem::replace(&mut current, Term::empty()));
                output = Some(Term::empty());
                i += 1;
            }
            '>' => return Err(malformed(i, "'>' without '-' before it")),
            '.' => {
                if chars.get(i + 1) != Some(&'.') || chars.get(i + 2) != Some(&'.') {
                    return Err(malformed(i, "'.' must be part of '...'"));
                }
                if chars.get(i + 3) == Some(&'.') {
                    return Err(malformed(i + 3, "'.' must be part of '...' (found '....')"));
                }
                if current.ellipsis.is_some() {
                    return Err(malformed(i, "a second '...' in one term"));
                }
                current.ellipsis = Some(current.letters.len());
                i += 2;
            }
            c => {
                return Err(Error::InvalidCharacter {
                    spec: text.to_string(),
                    ch: c,
                    pos: i,
                })
            }
        }
        i += 1;
    }
    let explicit = output.is_some();
    let output = if explicit {
        validate_output(text, &inputs, &current)?;
        current
    } else {
        inputs.push(current);
        implicit_output(&inputs)
    };
    Ok(Spec {
        text: text.to_string(),
        inputs,
        output,
        explicit,
    })
}

fn validate_output(text: &str, inputs: &[Term], out: &Term) -> Result<()> {
    for (k, (&c, &pos)) in out.letters.iter().zip(&out.positions).enumerate() {
        if let Some(j) = out.letters[..k].iter().position(|&d| d == c) {
            return Err(Error::RepeatedOutputIndex {
                spec: text.to_string(),
                label: c,
                first: out.positions[j],
                pos,
            });
        }
        if !inputs.iter().any(|t| t.letters.contains(&c)) {
            return Err(Error::UnknownOutputIndex {
                spec: text.to_string(),
                label: c,
                pos,
            });
        }
    }
    Ok(())
}

fn implicit_output(inputs: &[Term]) -> Term {
    let mut counts = [0usize; 128];
    for t in inputs {
        for &c in &t.letters {
            counts[c as usize] += 1;
        }
    }
    let letters: Vec<char> = (0u8..128)
        .filter(|&b| counts[b as usize] == 1)
        .map(char::from)
        .collect();
    let any_ellipsis = inputs.iter().any(|t| t.ellipsis.is_some());
    Term {
        positions: vec![usize::MAX; letters.len()],
        letters,
        ellipsis: any_ellipsis.then_some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implicit_rules() {
        assert_eq!(parse("ij,jk").unwrap().to_string(), "ij,jk->ik");
        assert_eq!(parse("ii").unwrap().to_string(), "ii->");
        assert_eq!(parse("ba").unwrap().to_string(), "ba->ab");
        assert_eq!(parse("bA,a").unwrap().to_string(), "bA,a->Aab");
        assert_eq!(
            parse("...ij,...jk").unwrap().to_string(),
            "...ij,...jk->...ik"
        );
        assert_eq!(parse("").unwrap().to_string(), "->");
    }

    #[test]
    fn spaces_anywhere() {
        assert_eq!(
            parse(" a b , b c - > a c ").map(|s| s.to_string()),
            Err(Error::Malformed {
                spec: " a b , b c - > a c ".into(),
                pos: 11,
                reason: "'-' must be followed by '>'".into()
            })
        );
        assert_eq!(parse(" ab , bc -> ac ").unwrap().to_string(), "ab,bc->ac");
    }

    #[test]
    fn errors_carry_positions() {
        assert!(matches!(
            parse("ij,j1"),
            Err(Error::InvalidCharacter {
                pos: 4,
                ch: '1',
                ..
            })
        ));
        assert!(matches!(
            parse("ij->i->j"),
            Err(Error::Malformed { pos: 5, .. })
        ));
        assert!(matches!(
            parse("i..j"),
            Err(Error::Malformed { pos: 1, .. })
        ));
        assert!(matches!(
            parse("i....j"),
            Err(Error::Malformed { pos: 4, .. })
        ));
        assert!(matches!(
            parse("......"),
            Err(Error::Malformed { pos: 3, .. })
        ));
        assert!(matches!(
            parse("ij->i,j"),
            Err(Error::Malformed { pos: 5, .. })
        ));
        assert!(matches!(
            parse("ij,jk->kik"),
            Err(Error::RepeatedOutputIndex {
                label: 'k',
                first: 7,
                pos: 9,
                ..
            })
        ));
        assert!(matches!(
            parse("ij,jk->iz"),
            Err(Error::UnknownOutputIndex {
                label: 'z',
                pos: 8,
                ..
            })
        ));
        assert!(matches!(
            parse("ij>k"),
            Err(Error::Malformed { pos: 2, .. })
        ));
    }

    #[test]
    fn operands_and_ellipsis_positions() {
        let s = parse("a...b,...->...").unwrap();
        assert_eq!(s.inputs().len(), 2);
        assert_eq!(s.inputs()[0].ellipsis(), Some(1));
        assert_eq!(s.inputs()[1].ellipsis(), Some(0));
        assert_eq!(s.output().ellipsis(), Some(0));
        assert_eq!(s.inputs()[0].positions(), &[0, 4]);
    }
}
