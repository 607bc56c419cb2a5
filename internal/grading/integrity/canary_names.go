package integrity

import (
	"crypto/rand"
	"math/big"
	"strings"
	"sync"
)

// A Name is a canary's identifier: a few ordinary words drawn at random
// for one evaluation, so that a canary's test, class or file is named the
// way a repository names its own and no fixed prefix, marker or hex token
// tells a patch which tests are the canary's. Each language spells it as
// its tests are spelled (Snake, Camel, Kebab) and adds only what its
// framework requires (test_, Test).
type Name []string

// Snake is the name as lower_case_words.
func (n Name) Snake() string { return strings.Join(n, "_") }

// Kebab is the name as lower-case-words.
func (n Name) Kebab() string { return strings.Join(n, "-") }

// Camel is the name as CapitalisedWords.
func (n Name) Camel() string {
	var b strings.Builder
	for _, w := range n {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// DrawNames draws k names of words words each (crypto/rand), none of
// whose spellings contains another's: a test id that holds one name can
// be told from one that holds another.
func DrawNames(k, words int) []Name {
	names := make([]Name, 0, k)
	for len(names) < k {
		n := make(Name, words)
		for i := range n {
			n[i] = randomWord()
		}
		if distinct(n, names) {
			names = append(names, n)
		}
	}
	return names
}

// distinct reports whether n's spellings and those of every name in
// others contain one another nowhere, and n repeats no word.
func distinct(n Name, others []Name) bool {
	for i, w := range n {
		for _, v := range n[:i] {
			if strings.Contains(w, v) || strings.Contains(v, w) {
				return false
			}
		}
	}
	for _, o := range others {
		for _, pair := range [...][2]string{{n.Snake(), o.Snake()}, {n.Camel(), o.Camel()}, {n.Kebab(), o.Kebab()}} {
			if strings.Contains(pair[0], pair[1]) || strings.Contains(pair[1], pair[0]) {
				return false
			}
		}
	}
	return true
}

func randomWord() string {
	ws := nameWords()
	i, err := rand.Int(rand.Reader, big.NewInt(int64(len(ws))))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return ws[i.Int64()]
}

// nameWords is the list names are drawn from: words a test suite uses
// for what it tests (288 of them, over 8 bits each).
var nameWords = sync.OnceValue(func() []string { return strings.Fields(wordList) })

const wordList = `
absent accept access active adjust admin alias align amount anchor append archive array arrow
assign async attach audit author backup badge balance banner batch before binary bitmap blank
block border bounce bracket branch bridge bucket budget buffer bundle button cache calendar
cancel canvas capture caret cascade catalog channel chapter charset checkbox chunk circle claim
client clock cluster column combine comment commit compact compare compile config connect
console contact content context convert cookie counter country cursor custom dashboard decimal
decode default delay delete delta depth detail device digest dialog digit direct disable
display divide domain double draft driver dynamic editor effect element email empty enable
encode engine entity entry escape event exact export factor feature fetch field filter finish
folder footer format fraction frame gateway global gradient graph group handle header height
helper hidden history hover icon ignore image import index inline input insert integer invoice
island journal kernel keyword label layout legacy length letter level limit linear locale
lookup margin marker master matrix medium member memory merge message method metric middle
minute mirror mobile module monitor monthly native nested network normal notice number object
offset option order origin output owner package padding panel parent parse partial patch
payload period plugin pointer policy portal prefix preview primary profile prompt proxy public
query queue quota radius random range reader record reduce region release remote render repeat
report request reset resolve result retry review revision router sample scale schema scope
screen script scroll search second select sender series server session shadow signal simple
single sketch slice socket source spacing status stream string suffix summary switch symbol
table target template tenant thread ticket timer token toggle topic total track travel tuple
unique update upload vector verify version visible volume widget window worker
`
