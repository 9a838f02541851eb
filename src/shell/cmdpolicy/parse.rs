//! The command-line parser: the types it produces, [`parse`], the grammar of lists, compound
//! and simple commands, and the token plumbing the word scanner in `lex` builds on.

use std::fmt;

use super::word::{Ctx, Wb};

/// Nesting limit for substitutions: hand-written commands nest a few levels; the limit keeps
/// hostile input from exhausting the stack of the recursive scanner.
const MAX_DEPTH: usize = 64;
/// Wrappers run the command in their arguments, which is reported too (`sudo rm` cannot hide
/// `rm`), with the options that take a value, so the value is not taken for the command, and
/// how many operands come before the command (`timeout 5 cmd`, `taskset 3 cmd`).
#[rustfmt::skip]
const WRAPPERS: &[(&str, &[&str], usize)] = &[("env", &["-u", "-C"], 0), ("command", &[], 0),
    ("builtin", &[], 0), ("exec", &["-a"], 0), ("nohup", &[], 0), ("time", &["-f", "-o"], 0),
    ("nice", &["-n"], 0), ("coproc", &[], 0), ("setsid", &[], 0), ("taskset", &[], 1),
    ("sudo", &["-u", "-g", "-C", "-D", "-p", "-r", "-t", "-U", "-T"], 0),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"], 1),
    ("stdbuf", &["-i", "-o", "-e"], 0), ("ionice", &["-c", "-n", "-p", "-P", "-u"], 0),
    ("xargs", &["-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"], 0)];
/// Builtins that run a string or a file as shell code, which cannot be checked.
const CODE_EVALUATORS: &[&str] = &["eval", "source", ".", "alias", "trap", "fc"];
/// Shells run code from `-c` or from stdin; only a script file named on the line is not a string.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh"];
/// Reserved words, recognised unquoted at command position. `OPENERS` push the word that closes
/// them; `MIDDLES` are valid only right inside the construct their paired word closes.
#[rustfmt::skip]
const KEYWORDS: &[&str] = &["if", "then", "elif", "else", "fi", "while", "until", "for", "select",
    "do", "done", "case", "esac", "{", "}", "function", "!", "[["];
#[rustfmt::skip]
const OPENERS: &[(&str, &str)] = &[("if", "fi"), ("while", "done"), ("until", "done"), ("{", "}")];
#[rustfmt::skip]
const MIDDLES: &[(&str, &str)] = &[("then", "fi"), ("elif", "fi"), ("else", "fi"), ("do", "done")];

/// A parse failure and its byte offset (approximate inside backticks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub offset: usize,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A closing quote, bracket, word or here-document delimiter never came.
    Missing(&'static str),
    /// A token where it cannot stand (`ls )`, `fi` without `if`), as written.
    Unexpected(String),
    /// Valid bash that this parser deliberately does not understand.
    Unsupported(&'static str),
    /// Substitutions nested deeper than `MAX_DEPTH`.
    TooDeep,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ParseErrorKind::Missing(what) => write!(f, "missing `{what}`")?,
            ParseErrorKind::Unexpected(token) => write!(f, "unexpected `{token}`")?,
            ParseErrorKind::Unsupported(what) => write!(f, "unsupported {what}")?,
            ParseErrorKind::TooDeep => write!(f, "nested deeper than {MAX_DEPTH} levels")?,
        }
        write!(f, " at byte {}", self.offset)
    }
}

/// Every simple command of a command line, nested ones included, in no guaranteed order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    pub commands: Vec<SimpleCommand>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// `None` for only assignments and/or redirections (`X=1`, `> f`, `{ …; } > f`).
    pub name: Option<CommandName>,
    pub args: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Variables assigned for the command (`X=1 cmd`, `env X=1 cmd`).
    pub assignments: Vec<String>,
    /// The wrapper (`sudo`, `xargs`, …) this command was found in.
    pub wrapped_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandName {
    /// Known before running, quotes removed (`'l's` is `ls`).
    Static(String),
    /// Depends on an expansion or a glob (`$CMD`, `$(echo rm)`, `"${X}"`, `r?`), as written.
    Dynamic(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// Quotes removed; expansions stay in their source form (`$HOME`, `$(…)`).
    pub text: String,
    /// Has an expansion or an unquoted glob, brace or tilde: its value is known only at run time.
    pub dynamic: bool,
    pub(super) quoted: bool,
    /// Bytes of `text` before the first quote, escape or expansion (for `NAME=` detection).
    pub(super) literal_prefix: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The explicit file descriptor (`2` in `2>&1`).
    pub fd: Option<u32>,
    /// As written: `>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `>&`, `<&`, `<`, `<<`, `<<-`, `<<<`.
    pub op: &'static str,
    pub target: Word,
}

impl Word {
    /// The text, if the word is a bare literal that can be a reserved word.
    fn plain(&self) -> Option<&str> {
        (!self.quoted && !self.dynamic).then_some(self.text.as_str())
    }

    /// The variable name, if this word is an assignment (`NAME=…`, `NAME+=…`).
    fn assignment(&self) -> Option<&str> {
        let literal = self.text.get(..self.literal_prefix)?;
        let name = literal[..literal.find('=')?].trim_end_matches('+');
        let ident = name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
        (ident && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')).then_some(name)
    }

    fn name(&self) -> CommandName {
        match self.dynamic {
            true => CommandName::Dynamic(self.text.clone()),
            false => CommandName::Static(self.text.clone()),
        }
    }
}

impl SimpleCommand {
    pub fn static_name(&self) -> Option<&str> {
        match &self.name {
            Some(CommandName::Static(n)) => Some(n),
            _ => None,
        }
    }

    /// Whether the command runs a string or its input as shell code (`eval`, `source`, `.`,
    /// `bash -c`, a shell without a script file): what that code does cannot be checked.
    pub fn evaluates_code(&self) -> bool {
        let name = self.static_name().unwrap_or_default();
        let c_flag = |a: &Word| a.dynamic || (a.text.starts_with('-') && a.text.contains('c'));
        let no_script = self.args.iter().all(|a| a.text.starts_with(['-', '+']));
        let shell = SHELLS.contains(&name) && (no_script || self.args.iter().any(c_flag));
        shell || CODE_EVALUATORS.contains(&name)
    }
}

impl Redirect {
    /// Whether this redirection opens a file for writing; fd duplications like `2>&1` do not.
    pub fn writes_file(&self) -> bool {
        let fd = self.target.text.trim_end_matches('-');
        match self.op {
            "<" | "<<" | "<<-" | "<<<" | "<&" => false,
            ">&" => self.target.dynamic || !fd.bytes().all(|c| c.is_ascii_digit()),
            _ => true,
        }
    }
}

/// Parses a command line into its simple commands; see the module doc for what is understood.
pub fn parse(src: &str) -> Result<Script, ParseError> {
    let mut p = Parser {
        src: src.as_bytes(),
        ..Parser::default()
    };
    p.list(false)?;
    Ok(Script { commands: p.out })
}

pub(super) enum Token {
    Word(Word),
    Op(&'static str),
    Redir(Option<u32>, &'static str),
    Newline,
    Eof,
}

pub(super) type PResult<T> = Result<T, ParseError>;

#[derive(Default)]
pub(super) struct Parser<'s> {
    pub(super) src: &'s [u8],
    pub(super) pos: usize,
    /// Offset of `src` in the caller's input (backtick and here-document bodies).
    pub(super) base: usize,
    depth: usize,
    pub(super) tok_start: usize,
    peeked: Option<Token>,
    /// Pending here-documents: delimiter, whether `<<-` strips tabs, whether the body expands.
    pub(super) heredocs: Vec<(Vec<u8>, bool, bool)>,
    out: Vec<SimpleCommand>,
}

impl Parser<'_> {
    pub(super) fn at(&self, off: usize) -> Option<u8> {
        self.src.get(self.pos + off).copied()
    }

    pub(super) fn fail<T>(&self, kind: ParseErrorKind) -> PResult<T> {
        Err(ParseError {
            offset: self.base + self.pos.min(self.src.len()),
            kind,
        })
    }

    /// Skips `skip` bytes, then runs `f` one substitution level deeper.
    pub(super) fn nested(
        &mut self,
        skip: usize,
        f: impl FnOnce(&mut Self) -> PResult<()>,
    ) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return self.fail(ParseErrorKind::TooDeep);
        }
        (self.pos, self.depth) = (self.pos + skip, self.depth + 1);
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// Parses `src` on its own (a backtick body, or with `doc` a here-document) for its commands.
    pub(super) fn sub(&mut self, src: &[u8], base: usize, doc: bool) -> PResult<()> {
        let mut p = Parser {
            src,
            base,
            depth: self.depth,
            ..Parser::default()
        };
        let r = p.nested(0, |p| {
            if doc {
                p.scan(&mut Wb::default(), Ctx::Doc)
            } else {
                p.list(false)
            }
        });
        self.out.append(&mut p.out);
        r
    }

    fn next(&mut self) -> PResult<Token> {
        self.peeked.take().map_or_else(|| self.lex(), Ok)
    }

    fn peek(&mut self) -> PResult<&Token> {
        let t = self.next()?;
        Ok(self.peeked.insert(t))
    }

    /// Consumes the next token if it is the operator, newline or plain word `text`.
    fn eat(&mut self, text: &str) -> PResult<bool> {
        let yes = match self.peek()? {
            Token::Word(w) => w.plain() == Some(text),
            Token::Op(op) => *op == text,
            Token::Newline => text == "\n",
            _ => false,
        };
        Ok(yes && self.next().is_ok())
    }

    fn expect(&mut self, text: &'static str) -> PResult<()> {
        if self.eat(text)? {
            Ok(())
        } else {
            self.unexpected(text)
        }
    }

    fn expect_word(&mut self) -> PResult<Word> {
        match self.next()? {
            Token::Word(w) => Ok(w),
            _ => self.unexpected("word"),
        }
    }

    /// Fails at the token just read or peeked; at the end of the input, `what` is missing.
    fn unexpected<T>(&mut self, what: &'static str) -> PResult<T> {
        let text = String::from_utf8_lossy(&self.src[self.tok_start..self.pos]);
        let text = text.lines().next().unwrap_or_default().trim().to_owned();
        self.pos = self.tok_start;
        self.fail(match text.is_empty() {
            true => ParseErrorKind::Missing(what),
            false => ParseErrorKind::Unexpected(text),
        })
    }

    /// Parses commands up to the end of input, or with `in_parens` up to the `)` closing a
    /// substitution. Compound commands are tracked on a stack of the words that close them.
    pub(super) fn list(&mut self, in_parens: bool) -> PResult<()> {
        let (mut open, mut at_cmd, mut dangling) = (Vec::<&'static str>::new(), true, false);
        loop {
            let tok = self.next()?;
            let top = open.last().copied().unwrap_or_default();
            let (op, was_dangling) = (matches!(tok, Token::Op("&&" | "||" | "|" | "|&")), dangling);
            dangling = op || (dangling && matches!(tok, Token::Newline)); // a command must follow
            let done = top.is_empty() && !was_dangling;
            let keyword = match &tok {
                Token::Word(w) if at_cmd => KEYWORDS.iter().copied().find(|k| w.plain() == Some(k)),
                _ => None,
            };
            at_cmd = match (tok, keyword) {
                (Token::Eof, _) if done && !in_parens => return Ok(()),
                (Token::Op(")"), _) if done && in_parens => return Ok(()),
                (Token::Eof, _) => {
                    return self.fail(ParseErrorKind::Missing(if top.is_empty() {
                        ")"
                    } else {
                        top
                    }));
                }
                (_, Some("for" | "select")) => {
                    open.push("done");
                    if self.eat("((")? {
                        self.arith()?;
                    }
                    while matches!(self.peek()?, Token::Word(w) if w.plain() != Some("do")) {
                        self.next()?;
                    }
                    matches!(self.peek()?, Token::Word(_))
                }
                (_, Some("case")) => {
                    open.push("esac");
                    self.expect_word()?;
                    while self.eat("\n")? {}
                    self.expect("in")?;
                    self.patterns()?
                }
                (_, Some("function")) => {
                    self.expect_word()?;
                    if self.eat("(")? {
                        self.expect(")")?;
                    }
                    true
                }
                (_, Some("[[")) => loop {
                    match self.next()? {
                        Token::Word(w) if w.plain() == Some("]]") => break false,
                        Token::Eof | Token::Op(";" | "&" | ";;" | ";&" | ";;&") => {
                            return self.unexpected("]]");
                        }
                        _ => {} // operands and `&&`, `<`, `(` are not shell syntax in here
                    }
                },
                (_, Some(k)) if k == top => {
                    open.pop();
                    false // after a closing word only redirections or an operator may follow
                }
                (_, Some(k)) => match OPENERS.iter().find(|(o, _)| *o == k) {
                    Some(&(_, close)) => {
                        open.push(close);
                        true
                    }
                    None if k == "!" || MIDDLES.contains(&(k, top)) => true,
                    None => return self.unexpected(k),
                },
                (t @ (Token::Word(_) | Token::Redir(..)), _)
                    if at_cmd || matches!(t, Token::Redir(..)) =>
                {
                    self.peeked = Some(t);
                    self.simple(at_cmd)?
                }
                (Token::Op("("), _) if at_cmd => {
                    open.push(")");
                    true
                }
                (Token::Op("(("), _) if at_cmd => {
                    self.arith()?;
                    false
                }
                (Token::Op(")"), _) if top == ")" => {
                    open.pop();
                    false
                }
                (Token::Op(";;" | ";&" | ";;&"), _) if top == "esac" => self.patterns()?,
                (Token::Newline | Token::Op(";" | "&"), _) => true,
                (Token::Op("&&" | "||" | "|" | "|&"), _) if !at_cmd => true,
                _ => return self.unexpected("command"),
            };
        }
    }

    /// Case patterns up to `)`, unless `esac` follows; a command may follow either way.
    fn patterns(&mut self) -> PResult<bool> {
        while self.eat("\n")? {}
        if !matches!(self.peek()?, Token::Word(w) if w.plain() == Some("esac")) {
            self.eat("(")?;
            self.expect_word()?;
            while self.eat("|")? {
                self.expect_word()?;
            }
            self.expect(")")?;
        }
        Ok(true)
    }

    /// A simple command, or with `words` false the redirections after a compound command;
    /// returns whether a command may follow (after the `NAME()` of a function definition).
    fn simple(&mut self, words: bool) -> PResult<bool> {
        let mut cmd = SimpleCommand::default();
        loop {
            match self.next()? {
                Token::Redir(fd, op) => {
                    let target = self.expect_word()?;
                    if op == "<<" || op == "<<-" {
                        let delim = target.text.clone().into_bytes();
                        self.heredocs.push((delim, op == "<<-", !target.quoted));
                    }
                    cmd.redirects.push(Redirect { fd, op, target });
                }
                Token::Word(w) if words && cmd.name.is_some() => cmd.args.push(w),
                Token::Word(w) if words => match w.assignment() {
                    Some(var) => cmd.assignments.push(var.to_owned()),
                    None if cmd == SimpleCommand::default() && self.eat("(")? => {
                        self.expect(")")?;
                        return Ok(true); // NAME() BODY: the body follows as a compound command
                    }
                    None => cmd.name = Some(w.name()),
                },
                t => {
                    self.peeked = Some(t);
                    break;
                }
            }
        }
        let mut inner = unwrap(&cmd);
        if cmd != SimpleCommand::default() {
            self.out.push(cmd);
        }
        while let Some(c) = inner {
            inner = unwrap(&c);
            self.out.push(c);
        }
        Ok(false)
    }
}

/// The command a wrapper runs (`sudo -u x rm`, `env A=1 ls`, `xargs -0 grep`), if any.
fn unwrap(cmd: &SimpleCommand) -> Option<SimpleCommand> {
    let wrapper = cmd.static_name()?;
    let &(_, takes_value, operands) = WRAPPERS.iter().find(|(w, ..)| *w == wrapper)?;
    let (mut i, mut assignments) = (0, Vec::new());
    while let Some(a) = cmd.args.get(i).filter(|a| !a.dynamic) {
        let t = a.text.as_str();
        if let Some(var) = a.assignment().filter(|_| wrapper == "env") {
            assignments.push(var.to_owned());
        } else if wrapper == "env" && (t.starts_with("-S") || t.starts_with("--split")) {
            let name = Some(CommandName::Dynamic(format!("env {t}"))); // a string split into words
            return Some(SimpleCommand {
                name,
                ..Default::default()
            });
        } else if !t.starts_with('-') || t == "-" {
            break;
        }
        i += 1 + usize::from(takes_value.contains(&t));
    }
    i += operands; // `timeout 5`: the duration is no command
    let (name, args) = (Some(cmd.args.get(i)?.name()), cmd.args[i + 1..].to_vec());
    let wrapped_by = Some(wrapper.to_owned());
    Some(SimpleCommand {
        name,
        args,
        assignments,
        wrapped_by,
        ..Default::default()
    })
}
