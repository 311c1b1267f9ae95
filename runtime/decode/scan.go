package decode

// The budget scan: one pass over YAML bytes, before the YAML library sees
// them, that counts tokens, measures nesting and the width of block
// mappings. It is not a parser: it errs on the side of counting more (a
// continuation line of a plain scalar counts as a token of its own, a
// strange indentation as another level), never fewer — so what it lets
// through, the library handles within the budget. Every indicator
// character counts as a token wherever it is, in quoted and block
// scalars and comments too: where the scan and the library disagree on
// where a scalar ends, what the library makes of the rest is still
// counted (each of its tokens needs an indicator next to it). The fuzz
// target checks that against the library.

// level is an open block collection: the column of its entries or keys.
type level struct {
	col  int
	seq  bool
	keys int
}

type budgetScan struct {
	src    []byte
	source string
	lim    Limits

	i          int  // offset in src
	line, col  int  // of src[i]: line 1-based, col in runes 0-based
	bol        bool // at the beginning of a line
	tokens     int
	maxTokens  int     // MaxTokens, or what is left of the Pool if less
	pooled     bool    // maxTokens is what is left of the Pool
	flow       int     // open [ and {
	block      []level // open block collections
	nodeStart  bool    // a node may start here
	keyCol     int     // column of the node that started on this line (block context), -1 none
	adjacentTo int     // offset just after a quoted scalar or a flow collection's end
	deepest    int     // the deepest nesting seen
}

// scanBudget refuses YAML over the token, depth or width budget, with the
// position where the budget ran out.
func scanBudget(source string, src []byte, lim Limits) *Error {
	s := &budgetScan{src: src, source: source, lim: lim, line: 1, bol: true, keyCol: -1, adjacentTo: -1, nodeStart: true}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		s.i = 3 // byte order mark
	}
	s.maxTokens = lim.MaxTokens
	if lim.Pool != nil && *lim.Pool < s.maxTokens {
		s.maxTokens, s.pooled = max(*lim.Pool, 0), true
	}
	err := s.run()
	if lim.Pool != nil {
		// What was scanned is spent, refused or not: a file that ran
		// the pool out leaves nothing for the next.
		*lim.Pool -= s.tokens
	}
	if err != nil {
		return err
	}
	return nil
}

func (s *budgetScan) run() *Error {
	for s.i < len(s.src) {
		if s.bol {
			if err := s.lineStart(); err != nil {
				return err
			}
			continue
		}
		c := s.src[s.i]
		if n := s.newlineAt(s.i); n > 0 {
			s.newline(n)
			s.bol = true
			continue
		}
		col := s.col
		var err *Error
		switch {
		case c == ' ' || c == '\t':
			s.adv()
		case c == '#' && (s.i == 0 || s.sepAt(s.i-1)):
			err = s.count()
			s.adv()
			if err == nil {
				err = s.toEOL()
			}
		case c == '"' || c == '\'':
			err = s.count()
			s.startNode(col)
			if err == nil {
				err = s.quoted(c)
			}
			s.nodeStart, s.adjacentTo = false, s.i
		case (c == '[' || c == '{') && (s.flow > 0 || s.nodeStart):
			err = s.count()
			s.startNode(col)
			s.flow++
			if err == nil {
				err = s.checkDepth()
			}
			s.adv()
			s.nodeStart = true
		case (c == ']' || c == '}') && s.flow > 0:
			err = s.count()
			s.flow--
			s.adv()
			s.nodeStart, s.adjacentTo = false, s.i
		case c == ',' && s.flow > 0:
			err = s.count()
			s.adv()
			s.nodeStart = true
		case c == '-' && s.flow == 0 && s.nodeStart && s.sepAt(s.i+1):
			err = s.count()
			if err == nil {
				err = s.entry(col)
			}
			s.adv()
			s.nodeStart, s.keyCol = true, -1
		case c == '?' && s.nodeStart && s.sepAt(s.i+1):
			err = s.count()
			if err == nil && s.flow == 0 {
				err = s.key(col)
			}
			s.adv()
			s.nodeStart, s.keyCol = true, -1
		case c == ':' && (s.sepAt(s.i+1) || (s.flow > 0 && (s.flowIndicatorAt(s.i+1) || s.adjacentTo == s.i))):
			err = s.count()
			if err == nil && s.flow == 0 {
				k := s.keyCol
				if k < 0 {
					k = col
				}
				err = s.key(k)
			}
			s.adv()
			s.nodeStart, s.keyCol = true, -1
		case (c == '|' || c == '>') && s.flow == 0 && s.nodeStart:
			// The header, a comment on it, the text.
			for k := 0; k < 3 && err == nil; k++ {
				err = s.count()
			}
			if err == nil {
				err = s.blockScalar()
			}
		case (c == '&' || c == '*') && s.nodeStart:
			// The indicator is a token; its name, up to a space, another.
			err = s.count()
			s.startNode(col)
			s.adv()
			if err == nil && s.i < len(s.src) && !s.sepAt(s.i) && s.src[s.i] != '&' && s.src[s.i] != '*' {
				if err = s.count(); err == nil {
					err = s.name()
				}
			}
		case c == '!' && s.nodeStart:
			err = s.count()
			s.startNode(col)
			if err == nil {
				err = s.name()
			}
		default:
			err = s.count()
			s.startNode(col)
			if err == nil {
				err = s.plain()
			}
			s.nodeStart = false
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lineStart reads a line's indentation and, in block context, a document
// marker or directive.
func (s *budgetScan) lineStart() *Error {
	s.bol = false
	for s.i < len(s.src) && s.src[s.i] == ' ' {
		s.adv()
	}
	if s.flow > 0 {
		return nil
	}
	s.nodeStart, s.keyCol = true, -1
	if s.col != 0 {
		return nil
	}
	if s.docMarkerAt(s.i) {
		s.block = s.block[:0]
		s.adv()
		s.adv()
		s.adv()
		return s.count()
	}
	if s.i < len(s.src) && s.src[s.i] == '%' {
		// A directive: a token per character, at most (the library
		// splits "%%%%" into four; a real directive is a few words).
		for s.i < len(s.src) && s.newlineAt(s.i) == 0 {
			if !s.sepAt(s.i) {
				if err := s.count(); err != nil {
					return err
				}
			}
			s.adv()
		}
	}
	return nil
}

// docMarkerAt: "---" or "..." at i, then a space or the end of the line.
func (s *budgetScan) docMarkerAt(i int) bool {
	return (s.hasAt(i, "---") || s.hasAt(i, "...")) && s.sepAt(i+3)
}

func (s *budgetScan) count() *Error {
	s.tokens++
	if s.tokens > s.maxTokens && s.pooled {
		return tooLarge(s.source, s.line, s.col+1, "more YAML tokens than are left of the budget this file shares with the files that include it or that it includes: include fewer or smaller files")
	}
	if s.tokens > s.maxTokens {
		return tooLarge(s.source, s.line, s.col+1, "more than %d YAML tokens (scalars, indicators and comments): split the file or shorten it", s.lim.MaxTokens)
	}
	return nil
}

func (s *budgetScan) checkDepth() *Error {
	s.deepest = max(s.deepest, len(s.block)+s.flow)
	if s.deepest > s.lim.MaxDepth {
		return invalid(s.source, s.line, s.col+1, "nested deeper than %d levels", s.lim.MaxDepth)
	}
	return nil
}

// startNode notes where a node starts on this line in block context: if a
// ":" follows, that is the column of its key.
func (s *budgetScan) startNode(col int) {
	if s.flow == 0 && s.keyCol < 0 {
		s.keyCol = col
	}
}

// entry is a block sequence entry ("- ") at col.
func (s *budgetScan) entry(col int) *Error {
	for len(s.block) > 0 && s.top().col > col {
		s.block = s.block[:len(s.block)-1]
	}
	if len(s.block) > 0 && s.top().col == col && s.top().seq {
		return nil
	}
	s.block = append(s.block, level{col: col, seq: true})
	return s.checkDepth()
}

// key is a block mapping key at col. A sequence at the same column was
// the value of the mapping's previous key (YAML lets "- " sit at the
// key's indentation), so it ends here.
func (s *budgetScan) key(col int) *Error {
	for len(s.block) > 0 && (s.top().col > col || (s.top().col == col && s.top().seq)) {
		s.block = s.block[:len(s.block)-1]
	}
	if len(s.block) > 0 && s.top().col == col {
		t := s.top()
		t.keys++
		if t.keys > s.lim.MaxKeys {
			return tooLarge(s.source, s.line, col+1, "more than %d keys in one mapping", s.lim.MaxKeys)
		}
		return nil
	}
	s.block = append(s.block, level{col: col, keys: 1})
	return s.checkDepth()
}

func (s *budgetScan) top() *level { return &s.block[len(s.block)-1] }

// quoted skips a single- or double-quoted scalar, which may span lines
// (a document marker at the start of one ends it, as the library has it).
func (s *budgetScan) quoted(q byte) *Error {
	s.adv()
	for s.i < len(s.src) {
		c := s.src[s.i]
		if n := s.newlineAt(s.i); n > 0 {
			s.newline(n)
			if s.docMarkerAt(s.i) {
				s.bol = true
				return nil
			}
			continue
		}
		if isIndicator[c] && c != q {
			if err := s.count(); err != nil {
				return err
			}
		}
		switch {
		case q == '"' && c == '\\':
			s.adv()
			if s.i < len(s.src) && s.newlineAt(s.i) == 0 {
				s.adv()
			}
		case q == '\'' && c == '\'' && s.i+1 < len(s.src) && s.src[s.i+1] == '\'':
			s.adv()
			s.adv()
		case c == q:
			s.adv()
			return nil
		default:
			s.adv()
		}
	}
	return nil
}

// isIndicator marks the characters the YAML library may make a token of,
// or split a scalar at; each one counts as a token more wherever it is.
var isIndicator = func() (t [256]bool) {
	for _, c := range []byte("-?:,[]{}#&*!|>'\"%@`") {
		t[c] = true
	}
	return t
}()

// plain skips a plain scalar's text on this line: up to ": ", " #", the
// end of the line, or in flow context a flow indicator.
func (s *budgetScan) plain() *Error {
	s.adv()
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case s.newlineAt(s.i) > 0:
			return nil
		case c == ':' && (s.sepAt(s.i+1) || (s.flow > 0 && s.flowIndicatorAt(s.i+1))):
			return nil
		case c == '#' && (s.src[s.i-1] == ' ' || s.src[s.i-1] == '\t'):
			return nil
		case s.flow > 0 && (c == ',' || c == '[' || c == ']' || c == '{' || c == '}'):
			return nil
		case isIndicator[c]:
			if err := s.count(); err != nil {
				return err
			}
		}
		s.adv()
	}
	return nil
}

// name skips a tag, or an anchor's or alias's name (counting the
// indicators in it, as in a plain scalar).
func (s *budgetScan) name() *Error {
	s.adv()
	for s.i < len(s.src) && !s.sepAt(s.i) && !s.flowIndicatorAt(s.i) {
		if isIndicator[s.src[s.i]] {
			if err := s.count(); err != nil {
				return err
			}
		}
		s.adv()
	}
	return nil
}

// blockScalar skips a literal or folded scalar: its header, then the lines
// indented deeper than the collection it belongs to — at the indentation
// its indicator gives, else at that of its first line that is not blank.
func (s *budgetScan) blockScalar() *Error {
	s.adv()
	explicit := 0
	for s.i < len(s.src) {
		c := s.src[s.i]
		if c >= '1' && c <= '9' {
			explicit = int(c - '0')
		} else if c != '+' && c != '-' {
			break
		}
		s.adv()
	}
	if err := s.toEOL(); err != nil {
		return err
	}
	parent := 0 // at the top level too: the library wants the text indented
	if len(s.block) > 0 {
		parent = s.top().col
	}
	content := -1
	if explicit > 0 {
		content = parent + explicit
	}
	for s.i < len(s.src) {
		n := s.newlineAt(s.i)
		if n == 0 {
			break
		}
		s.newline(n)
		// The next line: blank, content, or the end of the scalar.
		j := s.i
		for j < len(s.src) && s.src[j] == ' ' {
			j++
		}
		ind := j - s.i
		if j == len(s.src) {
			s.i, s.col = j, ind
			return nil
		}
		if s.newlineAt(j) > 0 {
			s.i, s.col = j, ind
			continue
		}
		if content < 0 {
			if ind <= parent {
				break
			}
			content = ind
		}
		if ind < content || (ind == 0 && s.docMarkerAt(j)) {
			break
		}
		s.i, s.col = j, ind
		if err := s.toEOL(); err != nil {
			return err
		}
	}
	s.bol = true
	return nil
}

// toEOL skips to the end of the line, counting its indicators.
func (s *budgetScan) toEOL() *Error {
	for s.i < len(s.src) && s.newlineAt(s.i) == 0 {
		if isIndicator[s.src[s.i]] {
			if err := s.count(); err != nil {
				return err
			}
		}
		s.adv()
	}
	return nil
}

// adv moves past one byte; the column counts runes.
func (s *budgetScan) adv() {
	if s.src[s.i]&0xC0 != 0x80 {
		s.col++
	}
	s.i++
}

// newline moves past a line break of n bytes.
func (s *budgetScan) newline(n int) {
	s.i += n
	s.line++
	s.col = 0
}

// newlineAt is the length of the line break at i: \n, \r\n, \r, or 0.
func (s *budgetScan) newlineAt(i int) int {
	if i >= len(s.src) {
		return 0
	}
	switch s.src[i] {
	case '\n':
		return 1
	case '\r':
		if i+1 < len(s.src) && s.src[i+1] == '\n' {
			return 2
		}
		return 1
	}
	return 0
}

// sepAt: the end, a space, a tab or a line break at i.
func (s *budgetScan) sepAt(i int) bool {
	if i >= len(s.src) {
		return true
	}
	c := s.src[i]
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

func (s *budgetScan) flowIndicatorAt(i int) bool {
	if i >= len(s.src) {
		return false
	}
	switch s.src[i] {
	case ',', '[', ']', '{', '}':
		return true
	}
	return false
}

func (s *budgetScan) hasAt(i int, p string) bool {
	return i+len(p) <= len(s.src) && string(s.src[i:i+len(p)]) == p
}
