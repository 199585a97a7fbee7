"""Prompt-injection signals: the ways a text addresses the model rather than informs it.

A flag for the application and the model, never a filter: the names found travel on the
``tool.result`` envelope (``injection``) of the tool executor, and on a ``policy.violation``
(``injection_in_hosted_content``) when a provider-hosted tool brought such text back
(``services/run_logic/source_trust.py``); the text is passed on whole. Each rule is a regex
searched near the words it needs (a substring search finds them); a text with non-ASCII
characters is scanned again after normalization (NFKC, format characters such as zero-width
spaces removed, look-alikes of Latin letters — Cyrillic, Greek, Armenian, letter-like symbols —
mapped to them by Unicode's confusables data), and runs that decode as base64 text are scanned
too. The phrases follow OWASP LLM01's examples and published jailbreak forms, in English,
German, French, Spanish, Portuguese, Italian, Russian, Chinese and Japanese.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from confusable_homoglyphs import confusables

__all__ = ["injection_signals", "SIGNALS"]

_VERB = (r"(?:ignore|disregard|forget|override|bypass|ignorier\w*|vergiss|vergesst|vergessen|"
         r"missachte\w*|ignorez|ignorer|oublie\w*|ignora\w*|olvida\w*|omite|omitir|"
         r"haz\s+caso\s+omiso|ignor[ae]\w*|esque[çc]a\w*|desconsider\w*|dimentica\w*|"
         r"игнорир\w*|проигнорир\w*|забудь\w*|не\s+обращай\w*)")
_QUALIFIER = (r"(?:previous|prior|above|earlier|preceding|all|any|your|vorherig\w*|"
              r"bisherig\w*|obig\w*|vorig\w*|alle\w*|deine\w*|ihre\w*|précédent\w*|"
              r"antérieur\w*|ci-dessus|tou\w+|vos|tes|anterior\w*|previ\w+|todas|tus|sus|"
              r"precedent\w*|tutte|прежн\w*|предыдущ\w*|вс[её]|вышеуказанн\w*|сво\w+|прошл\w*)")
_NOUN = (r"(?:instructions?|directions|prompts?|rules|messages?|directives?|guidelines|"
         r"anweisung\w*|instruktion\w*|befehl\w*|regeln|vorgaben|consignes|règles|instrucci\w+|"
         r"indicaciones|reglas|órdenes|instru[çc]\w+|regras|orienta[çc]\w+|istruzion\w*|regole|"
         r"инструкц\w*|указани\w*|команд\w*|правил\w*)")
# Romance languages put the qualifier after the noun ("les instructions précédentes").
_AFTER = r"(?:précédent\w*|antérieur\w*|ci-dessus|anterior\w*|previ\w+|precedent\w*)"
_CJK_QUALIFIER = r"(?:之前|以前|上面|上述|先前|前面|所有|全部|此前|原来|原有|以上)"
_I, _IS, _IM = re.I, re.I | re.S, re.I | re.M


@dataclass(frozen=True)
class _Rule:
    """``pattern`` raises ``signal``; it is searched only near one of ``words`` (lower-case)."""

    signal: str
    words: tuple[str, ...]
    pattern: re.Pattern[str]


def _rule(signal: str, words: str, pattern: str, flags: re.RegexFlag = _I) -> _Rule:
    return _Rule(signal, tuple(words.split("|")), re.compile(pattern, flags))


_RULES = (
    _rule("ignore_instructions", "ignor|disregard|forget|overrid|bypass|vergiss|vergess|"
          "missacht|oubli|olvid|omit|omiso|esqueç|esquec|desconsider|dimentic|игнор|забуд|"
          "обращай",
          rf"\b{_VERB}\b.{{0,40}}?\b{_QUALIFIER}\b.{{0,25}}?\b{_NOUN}"
          rf"|\b{_VERB}\b.{{0,30}}?\b{_NOUN}\s+{_AFTER}", _IS),
    _rule("ignore_instructions", "忽略|无视|無視|忘|忽视|忽視|不要理",
          rf"(?:忽略|无视|無視|忘记|忘記|忽视|忽視|不要理会|不要理會).{{0,8}}?{_CJK_QUALIFIER}"
          r".{0,8}?(?:指令|指示|说明|說明|提示|规则|規則|命令)"
          r"|(?:以前|前|上記|これまで|先|全て|すべて)の(?:指示|命令|指令|ルール|プロンプト).{0,6}?"
          r"(?:無視|忘れ)", _IS),
    # "you are now …", but not a notice ("you are now subscribed / logged in").
    _rule("role_override", "now",
          r"\byou\s+are\s+now\b(?!\s+(?:subscribed|unsubscribed|logged|signed|connected|"
          r"registered|enrolled|ready|able|eligible|set\s+up|all\s+set|following|part\s+of|"
          r"a\s+(?:member|subscriber|registered))\b)|\bfrom\s+now\s+on,?\s+you\b"),
    _rule("role_override", "act", r"\b(?:now|please|must|will|should|shall)\s+act\s+as\b"
          r"|^\W*act\s+as\b", _IM),
    _rule("role_override", "instruction|prompt|role|task",
          r"\bnew\s+instructions?\s*:|\byour\s+new\s+(?:role|instructions?|task)\b"
          r"|\b(?:new\s+)?system\s+prompt\s*:|\b(?:reveal|print|repeat|show|output|disclose|"
          r"leak)\b.{0,20}?\b(?:your|the)\s+(?:system\s+prompt|initial\s+instructions|"
          r"hidden\s+instructions)"),
    _rule("role_override", "bist|anweisung",
          r"\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort)\b|\bab\s+(?:jetzt|sofort)\s+bist\s+du\b"
          r"|\bneue\s+anweisungen\s*:|\bdeine\s+neuen\s+anweisungen\b"),
    _rule("role_override", "maintenant|désormais|dorénavant|nouvelles",
          r"\b(?:tu\s+es|vous\s+êtes)\s+(?:maintenant|désormais|dorénavant)\b"
          r"|\bà\s+partir\s+de\s+maintenant,?\s+(?:tu|vous)\b"
          r"|\b(?:tes|vos)\s+nouvelles\s+instructions\b|\bnouvelles\s+instructions\s*:"),
    _rule("role_override", "eres|nuevas",
          r"\b(?:ahora|a\s+partir\s+de\s+ahora|desde\s+ahora),?\s+(?:tú\s+)?eres\b"
          r"(?!\s+(?:miembro|parte|suscriptor|usuario))|\btus\s+nuevas\s+instrucciones\b"
          r"|\bnuevas\s+instrucciones\s*:"),
    _rule("role_override", "você|agora|novas",
          r"\b(?:agora|a\s+partir\s+de\s+agora),?\s+(?:você|tu)\s+(?:é|és|será)\b"
          r"(?!\s+(?:membro|parte|assinante))|\bvocê\s+agora\s+é\b"
          r"|\bsuas\s+novas\s+instruções\b|\bnovas\s+instruções\s*:"),
    _rule("role_override", "sei|nuove", r"\bora\s+sei\b|\bnuove\s+istruzioni\s*:"),
    _rule("role_override", "теперь|отныне|момента|новые",
          r"\bтеперь\s+ты\b|\bты\s+теперь\b|\bотныне\s+ты\b|\bс\s+этого\s+момента\s+ты\b"
          r"|\bновые\s+инструкции\s*:|\bтвои\s+новые\s+инструкции\b"),
    _rule("role_override", "现在|現在|指令|你的新|あなたは|新しい指示|システムプロンプト",
          r"你现在是|你現在是|(?:从|從)现在(?:开始|起)[，,]?\s*你|從現在開始[，,]?\s*你"
          r"|新的?指令[:：]|你的新(?:任务|任務|指令|角色)"
          r"|あなたは(?:今から|これから|今や)|(?:今から|これから)、?あなたは|新しい指示[:：]"
          r"|システムプロンプトを(?:表示|出力|教え)"),
    _rule("fake_role_tag", "system|assistant|instruction",
          r"<\s*/?\s*(system|assistant|instructions?)\s*>|^\s*(system|assistant)\s*:", _IM),
    # The special tokens of chat templates: ChatML, Llama 2 and 3, Gemma, Mistral, Alpaca.
    _rule("chat_template_token", "<|inst]|sys>>|_of_turn>|system_prompt]|##",
          r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|begin_of_text|"
          r"start_header_id|end_header_id|eot_id|eom_id|end)\|>|\[/?INST\]|<</?SYS>>"
          r"|<(?:start|end)_of_turn>|\[/?SYSTEM_PROMPT\]|^#{2,3}\s*(?:instruction|system)\s*:",
          _IM),
    _rule("tool_coercion", "tool|function", r"\b(call|invoke|run|use)\b.{0,30}\b(tool|"
          r"function)\b.{0,60}\b(now|immediately|instead)\b", _IS),
    # "never send your password" is advice, not a request; "POST /v1/tokens" is an API's path.
    _rule("exfiltration", "key|password|secret|credential|token|history",
          r"(?<!never )(?<!not )(?<!n't )\b(send|post|upload|forward|leak|exfiltrate)\b.{0,60}"
          r"(?<![/\w])(api[_ ]?keys?|passwords?|secrets?|credentials|tokens?|"
          r"conversation history|chat history)\b", _IS),
)
# Around each place where a rule's word occurs, the rule's regex is searched _REACH characters
# either side (longer than any match, but for runs of whitespace that long): a substring search
# is much faster than the regex engine, which tries every alternative at every position.
_REACH = 300

_MARKDOWN_LINK = re.compile(r"(!?)\[[^\]\n]{0,200}\]\(\s*<?(https?://[^\s)>]+)", re.I)
# Greedy and left to right, a match never starts inside a longer run: no look-behind needed.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
# A query value that asks to be filled in: a template placeholder or a name of what to leak.
_PLACEHOLDER = re.compile(r"[{}<>\[\]$]|\b[A-Z_]*(?:DATA|SECRET|SUMMARY|CONVERSATION|CHAT|"
                          r"HISTORY|PASSWORD|KEY|TOKEN|INFO|CONTEXT|PROMPT|EMAIL|MEMORY)[A-Z_]*\b")
_WORDS = re.compile(r"\w+")
# Control characters but the whitespace ones: text has almost none, binary data many.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

SIGNALS = (*dict.fromkeys(rule.signal for rule in _RULES), "markdown_exfiltration",
           "encoded_instructions", "obfuscated_text")


def _format_chars() -> re.Pattern[str]:
    """Unicode's format characters (category Cf: zero-width space and joiners, soft hyphen,
    bidirectional marks, tags …), which change no visible letter."""
    # Planes 2 to 13 hold none; plane 14 holds the tags.
    codes = [*range(0x20000), *range(0xE0000, 0xE1000)]
    chars = [chr(c) for c in codes if unicodedata.category(chr(c)) == "Cf"]
    return re.compile("[" + "".join(map(re.escape, chars)) + "]")


def _look_alikes() -> dict[int, str]:
    """Non-Latin letters that look like a Latin one (Greek, Cyrillic, Armenian, letter-like
    symbols, Latin extensions), from Unicode's confusables.txt."""
    blocks = [*range(0x80, 0x250), *range(0x370, 0x590), *range(0x1D00, 0x1E00),
              *range(0x2100, 0x2200)]
    found = confusables.is_confusable("".join(map(chr, blocks)), greedy=True,
                                      preferred_aliases=["latin"]) or []
    table: dict[int, str] = {}
    for entry in found:
        char = entry["character"]
        latin = [g["c"] for g in entry["homoglyphs"] if len(g["c"]) == 1 and g["c"].isascii()
                 and g["c"].isalpha()]
        if latin:
            # confusables.txt maps every vertical bar to "l"; a capital one reads as "I".
            table[ord(char)] = "i" if char.isupper() and latin[0] == "l" else latin[0]
    return table


_FORMAT_CHARS = _format_chars()
_LOOK_ALIKES = _look_alikes()


def injection_signals(text: str) -> list[str]:
    """The names of :data:`SIGNALS` found in ``text``, in that order."""
    found = _scan(text)
    if not text.isascii():
        plain = _FORMAT_CHARS.sub("", unicodedata.normalize("NFKC", text))
        hidden = (_scan(plain) | _scan(plain.translate(_LOOK_ALIKES))) - found
        if hidden:
            found |= hidden | {"obfuscated_text"}
    if _markdown_exfiltration(text):
        found.add("markdown_exfiltration")
    for decoded in _base64_texts(text):
        inner = set(injection_signals(decoded))
        if inner:
            found |= inner | {"encoded_instructions"}
            break
    return [name for name in SIGNALS if name in found]


def _scan(text: str) -> set[str]:
    lowered = text.lower()
    found: set[str] = set()
    for rule in _RULES:
        if rule.signal not in found and _near_a_word(rule, lowered):
            found.add(rule.signal)
    return found


def _near_a_word(rule: _Rule, text: str) -> bool:
    """Whether ``rule.pattern`` matches within _REACH of one of its words: each stretch where
    such windows overlap is searched once."""
    if len(text) <= 2 * _REACH:
        return any(word in text for word in rule.words) and bool(rule.pattern.search(text))
    places = sorted(at for word in rule.words for at in _occurrences(text, word))
    start = end = -1
    for at in places:
        if at - _REACH > end:
            if end >= 0 and rule.pattern.search(text, start, end):
                return True
            start = max(at - _REACH, 0)
        end = at + _REACH
    return end >= 0 and rule.pattern.search(text, start, end) is not None


def _occurrences(text: str, word: str) -> list[int]:
    places, at = [], text.find(word)
    while at >= 0:
        places.append(at)
        at = text.find(word, at + 1)
    return places


def _markdown_exfiltration(text: str) -> bool:
    """A markdown image or link whose URL's query carries data: a value to be filled in (a
    placeholder, or empty at the end of the URL); for an image, which a renderer fetches
    unasked, also prose or a base64 text."""
    if "](" not in text:
        return False
    for match in _MARKDOWN_LINK.finditer(text):
        image, url = match.group(1) == "!", match.group(2)
        if url.endswith("="):
            return True
        try:
            query = urlsplit(url).query
        except ValueError:  # not a URL ("http://[" opens an IPv6 address it does not close)
            continue
        for _, value in parse_qsl(query, keep_blank_values=True):
            if _PLACEHOLDER.search(value):
                return True
            if image and (len(_WORDS.findall(unquote_plus(value))) >= 3 or _base64_texts(value)):
                return True
    return False


def _base64_texts(text: str) -> list[str]:
    """The runs of ``text`` that decode as base64 (standard or URL-safe) to printable text."""
    texts = []
    for match in _BASE64_RUN.finditer(text):
        run = match.group().rstrip("=")
        if len(run) % 4 == 1:  # one character too many for any encoding: not base64 as it is
            run = run[:-1]
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True,
                                   altchars=b"-_" if "-" in run or "_" in run else None)
            decoded = raw.decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if len(_CONTROL.findall(decoded)) <= 0.05 * len(decoded):
            texts.append(decoded)
    return texts
