/* Plain English text -> Penn Treebank words, the tokens the shipped chart parser was trained on (WSJ, PTB-3).
 *
 *   import {ptbTokenize} from "./ptb_tokenize.js";
 *   ptbTokenize('"We can\'t (really) say," she said.')
 *     // ["``", "We", "ca", "n't", "-LRB-", "really", "-RRB-", "say", ",", "''", "she", "said", "."]
 *
 * The rules are those of the Penn Treebank's own tokenizer (Robert MacIntyre's tokenizer.sed, as NLTK's
 * TreebankWordTokenizer writes them), with the treebank's conventions on top:
 *   - double quotes become `` (opening) and '' (closing); a single opening quote becomes `;
 *   - punctuation is split off (, ; : ? ! % $ # @ -- ... and brackets), except a comma or colon inside a number (1,000  9:30),
 *     & inside a name (AT&T, S&P) and a currency prefix (US$, C$);
 *   - clitics are split off: n't 's 'm 'd 'll 're 've, and a possessive ' (investors '); can't -> ca n't, cannot -> can not;
 *   - only the sentence's last period is split off; abbreviations keep theirs (Mr. Corp. U.S.), and at the end the treebank
 *     writes "Inc ." but "U.S. ." ;
 *   - brackets become -LRB- -RRB- -LSB- -RSB- -LCB- -RCB-, and / and * are escaped as \/ and \* .
 * Typographic quotes, dashes and the ellipsis character are first written as the treebank's ASCII ones.
 * The input is one sentence; a period inside it is split off only where it ends the text.
 */

const CLITICS = /([^'\s])('[sSmMdD]|'ll|'LL|'re|'RE|'ve|'VE|n't|N'T)(?=\s|$)/g;
const SPLIT_WORDS = [  // words the treebank writes as two (tokenizer.sed's list)
  [/\b(can)(not)\b/gi, "$1 $2"], [/\b(d)('ye)\b/gi, "$1 $2"], [/\b(gim)(me)\b/gi, "$1 $2"], [/\b(gon)(na)\b/gi, "$1 $2"],
  [/\b(got)(ta)\b/gi, "$1 $2"], [/\b(lem)(me)\b/gi, "$1 $2"], [/\b(more)('n)\b/gi, "$1 $2"], [/\b(wan)(na)(?=\s)/gi, "$1 $2"],
  [/(^|\s)('t)(is)\b/gi, "$1$2 $3"], [/(^|\s)('t)(was)\b/gi, "$1$2 $3"],
];
const ESCAPES = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-"};
const KEEPS_FINAL_PERIOD = new Set(["U.S."]);  // at a sentence's end the treebank writes "U.S. ." (but "Inc ." "a.m .")

/** Typographic characters as the treebank's ASCII: curly quotes, dashes, the ellipsis, odd spaces. */
function asciiPunctuation(s) {
  return s
    .replace(/[\u00a0\u2000-\u200b\u202f\u205f\u3000]/g, " ")
    .replace(/[\u201c\u201e\u00ab]/g, " `` ").replace(/[\u201d\u00bb]/g, " '' ")
    .replace(/[\u2018\u201a]/g, "`").replace(/[\u2019\u02bc]/g, "'")
    .replace(/\u2026/g, "...").replace(/\s*[\u2014\u2015]\s*/g, " -- ")
    .replace(/(\d)\u2013(\d)/g, "$1-$2").replace(/\s*\u2013\s*/g, " -- ");
}

/** The Penn Treebank words of one English sentence. */
export function ptbTokenize(text) {
  if (typeof text !== "string") throw new TypeError("ptbTokenize: expected a string");
  let s = asciiPunctuation(text).trim();
  // opening double quotes: at the start, or after a space or an opening bracket
  s = s.replace(/^"/, " `` ").replace(/(``)/g, " $1 ").replace(/([\s([{<])"/g, "$1 `` ");
  // an opening single quote (not a clitic, not '80s or 'til): ` ; a closing one after a word is split off below
  s = s.replace(/(^|[\s([{<])'(?!(?:s|m|d|ll|re|ve|em|til|cause|\d\ds?)\b|n'(?=\s|$))(?=[^\s'])/gi, "$1 ` ");
  // punctuation
  s = s.replace(/\.\.\./g, " ... ").replace(/(?<!`)`(?!`)/g, " ` ");
  s = s.replace(/([,:])(?!\d)/g, " $1 ").replace(/(\D)([,:])/g, "$1 $2 ");
  s = s.replace(/[;@#?!]|%(?!-)/g, " $& ");
  s = s.replace(/[\][(){}<>]/g, " $& ");
  s = s.replace(/(^|\s)\$/g, "$1 $$ ").replace(/([A-Za-z]\$)(?=\d)/g, "$1 ");  // $5 -> $ 5; US$5 -> US$ 5
  s = s.replace(/&(?![A-Za-z])|(?<![A-Za-z])&/g, " & ");
  s = s.replace(/--+/g, " -- ");
  // the sentence's last period, before any closing quotes and brackets; and a period before a closing bracket
  s = s.replace(/([^.])\.((?:\s*[\])}>"'])*)\s*$/, "$1 . $2 ");
  s = s.replace(/([^.\s])\.(?=\s*[)\]}])/g, "$1 . ");
  // closing double quotes
  s = s.replace(/"/g, " '' ").replace(/(\S)('')/g, "$1 $2 ");
  // clitics, a closing single quote, and the words written as two
  s = ` ${s} `.replace(/([^'\s])(?<!(?:^|\s)'n)'(?=[\s\])}]|$)/g, "$1 ' ").replace(CLITICS, "$1 $2");
  for (const [re, to] of SPLIT_WORDS) s = s.replace(re, to);
  const words = s.split(/\s+/).filter(Boolean);
  // "U.S." at the end keeps its period: the treebank writes "U.S. ."
  const n = words.length;
  if (n >= 2 && words[n - 1] === "." && KEEPS_FINAL_PERIOD.has(words[n - 2] + ".")) words[n - 2] += ".";
  return words.map(w => ESCAPES[w] ?? w.replace(/[/*]/g, "\\$&"));
}
