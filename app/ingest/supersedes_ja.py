"""The supersedes model's features for Japanese (issue 40): cues read from the characters.

The English model (app/ingest/supersedes_en.py) reads English cue words and the 768D vectors of
an English embedder. A Japanese message gets a model of its own, trained on Japanese pairs
written for this project (bench/data/supersedes/ja_*.jsonl), over the multilingual 512D vectors
every memory already has (memories.embedding_ml, app/ml/multilingual.py) and the cues below.

Japanese has no spaces and Python has no kuromoji, so the cues are character sequences: verb
stems that tell a change of state (引っ越, 辞め, 乗り換, 変更, ...), "now"-words (今は, 最近は,
もう, これから), endings (亡くな, 完済, 卒業, もう…ない), additions (〜も after a noun,
もう一, 加えて, ほかに), one-off episodes (昨日, 週末, 出張, 遊びに), a question or a request,
a person the memory does not name (妹, 同僚, 夫, ...), and the verb's form at a clause's end:
the past (〜た, 〜ました) tells an event, 〜ている a state. The words a memory and a sentence
share are counted over kanji bigrams and katakana, Latin and digit runs (no tokenizer needed:
住んでいます and 住んでいる share 住, and 名古屋 and 名古屋市 share their bigrams). The cue lists
are general Japanese, not phrases of the training pairs; their weights are learned.
"""

from __future__ import annotations

import math
import re
import unicodedata

from app.memories.sentences import join_short

# The features of a pair whatever its language (how near, how much shared), named as the
# English model (app/ingest/supersedes_en.py) names them; each model adds its cues after them.
SHARED_FEATURES = (
    "cosine",
    "margin",
    "closest",
    "memory_repeated",
    "new_words",
    "new_value",
    "old_value",
)
FEATURES = (
    *SHARED_FEATURES,
    "change_cue",
    "now_cue",
    "ending_cue",
    "additive",
    "episode",
    "question",
    "other_person",
    "past_tense",
    "ongoing",
    "negation_flip",
    "memory_changed",
    "memory_possessive",
    "change_direction",
    "cosine_x_change",
    "cosine_x_additive",
    "margin_x_additive",
    "margin_x_other_person",
)


def _any(*stems: str) -> re.Pattern[str]:
    return re.compile("|".join(sorted(stems, key=len, reverse=True)))


# Change of state: moving, joining and leaving, replacing, ending a plan, becoming.
CHANGE = _any(
    "引っ越",
    "引越",
    "移っ",
    "移り",
    "移転",
    "移住",
    "移籍",
    "移行",
    "転職",
    "転勤",
    "転校",
    "転居",
    "転部",
    "異動",
    "出向",
    "辞め",
    "辞職",
    "退職",
    "退社",
    "退会",
    "退部",
    "退院",
    "入社",
    "入学",
    "就職",
    "独立",
    "開業",
    "閉店",
    "廃業",
    "変わ",
    "変え",
    "変更",
    "替え",
    "替わ",
    "換え",
    "乗り換",
    "切り替",
    "買い替",
    "買い換",
    "住み替",
    "取り直",
    "売っ",
    "売却",
    "手放",
    "譲っ",
    "譲り",
    "処分",
    "捨て",
    "やめ",
    "止め",
    "解約",
    "卒業",
    "昇進",
    "昇格",
    "昇給",
    "降格",
    "引退",
    "定年",
    "結婚",
    "入籍",
    "離婚",
    "別れ",
    "婚約",
    "付き合い始",
    "延期",
    "延び",
    "ずらし",
    "繰り上げ",
    "繰り下げ",
    "前倒し",
    "キャンセル",
    "中止",
    "取り消",
    "始め",
    "始まっ",
    "購入",
    "増や",
    "減ら",
    "上が",
    "下が",
    "治っ",
    "完治",
    "回復",
    "着任",
    "就任",
    "後任",
    "交代",
    "代わっ",
    "になった",
    "になりました",
    "ようになっ",
    "ようにし",
    "ことにし",
    "ことになっ",
    "にしました",
    "にした",
    "決まっ",
    "決めた",
    "決めました",
)
# "Now" and "from now on": the new state holds today.
NOW = re.compile(
    r"今は|今では|今の|現在|最近は|最近|このごろ|近頃|もはや|これから|今後|以降|今度から|"
    r"からは|ようやく|やっと|ついに|とうとう|代わりに|新しい|新しく|新た|"
    r"もう(?![一二三1-9少])"
)
# An ending: a death, a debt paid, a course finished, "no longer".
ENDING = re.compile(
    r"亡くな|死ん|他界|終わ|終え|終了|完済|払い終|卒業|元の|元カ|前の|以前|昔は|かつて|"
    r"別れ|引退|解約|なくなっ|いなくなっ|いない生活|"
    r"もう[^。、]{0,16}?(?:ない|ません|なかった)"
)
# An addition: "X too" (も after a noun or a particle), one more, besides, a second one.
ADDITIVE = re.compile(
    r"(?<=[\u3400-\u4dbf\u4e00-\u9fff\u30a0-\u30ffA-Za-z0-9にでとへ])も(?![うのちらっしど])|"
    r"もう[一二三1-9]|[二三四2-4]つ目|[二三四2-4][匹台人頭羽本]目|他に|ほかに|さらに|追加|"
    r"加えて|に加え|両方|別の|副業|掛け持ち"
)
# A one-off: a day, a trip, a visit, an event.
EPISODE = re.compile(
    r"今日|昨日|一昨日|今朝|今夜|昨夜|昨晩|週末|連休|旅行|出張|遊びに|訪ね|訪れ|観光|会議|"
    r"一日中|日帰り|行ってき|してきた|帰りに|発表会|試合|イベント|パーティー|飲み会|飲みに|"
    r"ランチに|途中で"
)
QUESTION = re.compile(r"(?:\?|か|かな|でしょうか|教えて(?:ください)?|ください|下さい)[。.!\s]*$")
PERSON = re.compile(
    r"祖母|祖父|義母|義父|両親|[姉妹兄弟]|(?<!祖)(?<!義)[母父]|妻|(?<!丈)夫|息子|娘|友達|友人|"
    r"同僚|同期|先輩|後輩|彼氏|彼女|子供|子ども|主人|旦那|奥さん|隣人|叔父|叔母|伯父|伯母|"
    r"いとこ|甥|姪|孫|ルームメイト|上司|部下|部長|課長|社長|先生"
)
# The verb's form where a clause ends: the past tells an event, 〜ている a state.
PAST = re.compile(
    r"(?:ました|でした|かった|[っんいきしちにびみりえけせてねめれげじべ]た|んだ|いだ)"
    r"(?=$|[。、,.!?\s」)]|ので|から|けど|が|し[、。]|り|ら)"
)
ONGOING = re.compile(
    r"[てで](?:い(?:ます|る|た|ました)|る|ます|た)(?=$|[。、,.!?\s]|ので|けど|が|よ|ね)"
)
NEGATIVE = re.compile(r"(?:ない|ません|なかった|ず)(?=$|[。、,.!?\s]|です|でした|の|よ|ね|生活)")
# A word and the particle after it: the topic or object of a change (〜を辞めた, 〜は解約した,
# 〜から〜に), or the owner of something else (〜のコース, 〜のタイヤ: a part of it changed).
_MARKED = re.compile(
    r"([\u3400-\u4dbf\u4e00-\u9fff々\u30a0-\u30ffーa-z0-9]+)(を|は|が|から|より|の)"
)
# How far after its topic or object a change cue may come (one clause).
CHANGE_REACH = 16
# The patterns read normalised text (NFKC: full-width ! ? , ) and digits are ASCII).
# Content units: runs of kanji (read as bigrams), of katakana, of Latin letters or digits.
_KANJI = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff々〆]+")
_OTHER_RUN = re.compile(r"[\u30a0-\u30ffー]{2,}|[a-z0-9]+")
# Sentences end at 。 or a full-width or ASCII ! or ?; a shorter piece joins the next one.
_SENTENCE_END = re.compile(r"(?<=[。\uff01\uff1f!?])\s*")
MIN_SENTENCE_CHARS = 6


def normalise(text: str) -> str:
    """NFKC (full-width digits and letters to ASCII, half-width kana to full), lower case."""
    return unicodedata.normalize("NFKC", text).lower().strip()


def split_sentences(text: str) -> list[str]:
    """Japanese sentences ending at 。, ! or ? (also full width); a short piece joins the
    next (the last the one before). A text without those marks is one sentence."""
    pieces = [p for p in _SENTENCE_END.split(text.strip()) if p]
    return join_short(pieces, lambda s: len(s) < MIN_SENTENCE_CHARS, separator="")


def content_units(text: str) -> set[str]:
    """Kanji bigrams (a lone kanji as itself), katakana runs, Latin and digit runs."""
    units: set[str] = set()
    for run in _KANJI.findall(text):
        units.update([run] if len(run) == 1 else (run[i : i + 2] for i in range(len(run) - 1)))
    units.update(_OTHER_RUN.findall(text))
    return units


def values(text: str) -> set[str]:
    """What may be a fact's value: a katakana word, a Latin word, a number, a kanji word of
    two or more characters (a place, an employer, a name)."""
    found = {run for run in _KANJI.findall(text) if len(run) >= 2}
    found.update(_OTHER_RUN.findall(text))
    found.update(re.findall(r"\d+", text))
    return found


def _leading_word(text: str) -> str:
    """The run of kanji, katakana or Latin letters a text starts with."""
    found = re.match(r"[\u3400-\u4dbf\u4e00-\u9fff々\u30a0-\u30ffーa-z0-9]+", text)
    return found.group() if found else ""


def about_someone_else(memory: str, sentence: str) -> bool:
    """Whether the sentence tells another person's fact: a person word the memory does not
    have as its topic or subject (同僚が…引っ越した, 夫は…, 妻も…). Such a sentence never
    supersedes the user's memory, however close its topic (precision first)."""
    memory_people = set(PERSON.findall(normalise(memory)))
    sentence_n = normalise(sentence)
    return any(
        m.group() not in memory_people and sentence_n[m.end() : m.end() + 1] in ("は", "が", "も")
        for m in PERSON.finditer(sentence_n)
    )


def memory_roles(memory_units: set[str], sentence: str) -> tuple[float, float]:
    """Whether a word of the memory is what the sentence changes (its topic or object, a
    change cue after it in the clause) and how often one owns another thing (〜の followed
    by a word the memory does not have)."""
    changed = owned = 0.0
    for match in _MARKED.finditer(sentence):
        if not content_units(match.group(1)) & memory_units:
            continue
        if match.group(2) == "の":
            # 自転車のタイヤ: a part of it; 整体の予約, the memory's own phrase, is not.
            owned += not content_units(_leading_word(sentence[match.end() :])) & memory_units
            continue
        clause = re.split(r"[。!?]", sentence[match.end() : match.end() + CHANGE_REACH])[0]
        change = CHANGE.search(clause) or ENDING.search(clause)
        # もう一匹飼い始めた, 〜も始めた: one more of it, not a change of it.
        if change and not ADDITIVE.search(clause[: change.start()]):
            changed = 1.0
    return changed, owned


def matched_cues(sentence: str) -> list[str]:
    """The change, now and ending cues a sentence contains, as said (the decision's reason)."""
    text = normalise(sentence)
    found = [m.group() for pattern in (CHANGE, NOW, ENDING) for m in pattern.finditer(text)]
    unique = list(dict.fromkeys(found))
    return [cue for cue in unique if not any(cue != other and cue in other for other in unique)]


def pair_features(
    memory: str, sentence: str, cosine: float, next_cosine: float | None, shift: float
) -> list[float] | None:
    """The features of one (memory, sentence) pair, in the order of FEATURES (the arguments
    as app.ingest.supersedes_en.pair_features takes them, over multilingual vectors); None for a
    pair the model does not judge (another person's fact: `about_someone_else`)."""
    if about_someone_else(memory, sentence):
        return None
    memory_n, sentence_n = normalise(memory), normalise(sentence)
    memory_units, sentence_units = content_units(memory_n), content_units(sentence_n)
    memory_values, sentence_values = values(memory_n), values(sentence_n)
    change = len(CHANGE.findall(sentence_n))
    additive = len(ADDITIVE.findall(sentence_n))
    memory_people = set(PERSON.findall(memory_n))
    margin = cosine - next_cosine if next_cosine is not None else cosine
    changed, owned = memory_roles(memory_units, sentence_n)
    other_person = any(p not in memory_people for p in PERSON.findall(sentence_n))
    return [
        cosine,
        margin,
        float(next_cosine is None or cosine >= next_cosine),
        len(memory_units & sentence_units) / len(memory_units) if memory_units else 0.0,
        math.log1p(len(sentence_units - memory_units)),
        float(bool(sentence_values - memory_values)),
        float(bool(sentence_values & memory_values)),
        float(change),
        float(len(NOW.findall(sentence_n))),
        float(len(ENDING.findall(sentence_n))),
        float(additive),
        float(len(EPISODE.findall(sentence_n))),
        float(QUESTION.search(sentence_n) is not None),
        float(other_person),
        float(len(PAST.findall(sentence_n))),
        float(len(ONGOING.findall(sentence_n))),
        float(bool(NEGATIVE.search(sentence_n)) != bool(NEGATIVE.search(memory_n))),
        changed,
        owned,
        shift,
        cosine * min(change, 2),
        cosine * min(additive, 2),
        # The nearer the topic, the more "one more" or "someone else" says it is not a change.
        max(margin, 0.0) * min(additive, 2),
        max(margin, 0.0) * other_person,
    ]
