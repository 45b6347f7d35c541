"""get_tariff_table of the customs tariff service (the Python escape hatch).

The schedule's tariff table is generated once per run from the run value ``table_seed`` (rule 14)
and stored in the business state on the first call (one ``transition`` ledger record whose ``new``
is the table exactly as served); later calls answer the stored table unchanged. The answer's
structuredContent is the table; its text content is only a short summary (schedule and line
count), so the lines exist only in the structured result.

The table holds, on purpose, the JSON shapes a lossy conversion of a structured result breaks:

* booleans next to strings that read ``"true"``/``"false"`` (``preferential`` is a boolean, the
  licensing system's ``licence`` status a string enum);
* an empty object next to ``null`` (``quota``: ``{}`` a quota regime with no open tranche, ``null``
  no quota regime) and empty objects/lists elsewhere (``notes: {}``);
* arrays of arrays (``bands``: ``[from_kg, to_kg | null, rate]``) and deep nesting
  (``origin.rules.cumulation.zones[i][j]``, ``origin.rules.proof.threshold.EUR``);
* object keys with dots, slashes and non-ASCII letters (``"TN.2027/14"``, ``"Fußnote§3"``);
* floats whose shortest form matters (``1e-07``, ``0.30000000000000004``);
* non-ASCII text (German, Polish, French, Czech and CJK descriptions);
* and its size: 150-190 lines, some 30-40 KB of JSON (``line_count`` states how many).

Called with ``offset``/``limit`` it serves one page of the same stored table (at most ``MAX_PAGE``
lines, with a ``page`` block), the recovery path for a client that cannot take the whole table
in one result.
"""

from __future__ import annotations

import random
from typing import Any

from tracetrial.policy import Call, Reply

SCHEDULES = ("EU-TARIC-2027-01",)
#: The largest page get_tariff_table serves (``limit``).
MAX_PAGE = 50
CHAPTERS = ("0901", "0902", "1806", "2203", "3304", "3926", "4202", "6109", "6204", "6403", "7318", "8414",
            "8415", "8443", "8471", "8504", "8517", "8528", "9018", "9401", "9503")
DESCRIPTIONS = (
    "Kaffee, geröstet", "Grüner Tee", "Schokolade – gefüllt", "Bier aus Malz", "Préparations de maquillage",
    "Articles de ménage", "Torebki skórzane", "T-shirts en coton", "Dámské šaty", "Obuwie z gumy",
    "Schrauben, verzinkt", "Ventilatoren ≤ 125 W", "Klimageräte", "プリンター部品", "携帯型計算機 ≤ 10 kg",
    "Transformateurs", "智能手机", "Moniteurs LCD", "Dentalinstrumente", "Sièges pivotants", "Zabawki – klocki",
)
#: Ordinary ad-valorem rates, and the two whose shortest form a lossy number conversion changes.
RATES = (0.017, 0.02, 0.027, 0.035, 0.045, 0.065, 0.08, 0.12, 0.125, 0.17)
TINY = 1e-07
SUM = 0.1 + 0.2  # 0.30000000000000004
LICENCE = ("true", "false", "pending")
ZONES = ((("EU", "NO", "IS"), ("CH",)), (("EU",), ("TR", "GE"), ("UA",)), (("EU", "CH"),), (("EU",), ("VN",)))
NOTE_KEYS = ("TN.2027/14", "Fußnote§3", "CN.8471.30", "Anm.§12 (b)", "脚注.7")
NOTE_TEXTS = ("Aussetzung bis 30.06.2027", "nur für Luftfracht", "vgl. Anhang II – Nr. 4", "適用除外あり",
              "Zollkontingent: siehe Verordnung (EU) 2027/118")


def _bands(rng: random.Random, rate: float) -> list[list[Any]]:
    """Weight bands ``[from_kg, to_kg | None, rate]``: contiguous from 0, the last unbounded."""
    shape = rng.randrange(4)
    if shape == 0:
        return [[0, None, rate]]
    cut = rng.choice((250, 500, 750, 1000, 1500))
    low = rng.choice(RATES)
    if shape == 1:
        return [[0, cut, low], [cut, None, rate]]
    if shape == 2:
        return [[0, cut, rate], [cut, None, low]]
    top = cut + rng.choice((250, 500, 2000))
    return [[0, cut, low], [cut, top, rate], [top, None, rng.choice(RATES)]]


def _line(rng: random.Random, n: int, hs_seen: set[str]) -> dict[str, Any]:
    k = rng.randrange(len(CHAPTERS))
    hs = ""
    while not hs or hs in hs_seen:
        hs = f"{CHAPTERS[k]}.{rng.randrange(10, 100)}.{rng.choice(('00', '10', '20', '80', '90'))}"
    hs_seen.add(hs)
    rate = rng.choice(RATES)
    line: dict[str, Any] = {
        "line": f"TL-{n:03d}",
        "hs": hs,
        "desc": DESCRIPTIONS[k],
        "preferential": False,
        "licence": rng.choice(LICENCE),
        "quota": None if rng.random() < 0.8 else {"order": f"09.{rng.randrange(1000, 10000)}",
                                                   "open_kg": rng.randrange(100, 50000)},
        "bands": _bands(rng, rate),
        "notes": {},
    }
    if rng.random() < 0.2:
        keys = rng.sample(NOTE_KEYS, rng.choice((1, 2)))
        line["notes"] = {key: rng.choice(NOTE_TEXTS) for key in keys}
    if rng.random() < 0.12:
        line["origin"] = _origin(rng)
    return line


def _origin(rng: random.Random) -> dict[str, Any]:
    zones = rng.choice(ZONES)
    return {"rules": {"cumulation": {"kind": rng.choice(("bilateral", "diagonal")),
                                     "zones": [list(z) for z in zones]},
                      "proof": {"type": rng.choice(("REX", "EUR.1", "Statement on origin")),
                                "threshold": {"EUR": rng.choice((6000, 10000))}, "waiver": {}}}}


def _band_for(bands: list[list[Any]], kg: int) -> list[Any]:
    return next(b for b in bands if b[0] <= kg and (b[1] is None or kg < b[1]))


def build_table(seed: str, revision: str, schedule: str) -> dict[str, Any]:
    """The schedule's table, a pure function of the run values (and the schedule name)."""
    rng = random.Random(f"{seed}:{schedule}")
    count = rng.randrange(150, 191)
    hs_seen: set[str] = set()
    lines = [_line(rng, n, hs_seen) for n in range(1, count + 1)]
    # Empty-object quotas (the turn-1 selection): 6-9 lines, none of them null or a tranche.
    n_empty, n_pref = rng.randrange(6, 10), rng.randrange(7, 11)
    chosen = rng.sample(range(count), n_empty + n_pref)
    empty, pref = chosen[:n_empty], chosen[n_empty:]
    for i in empty:
        lines[i]["quota"] = {}
    # Preferential lines (the turn-2 selection, none of them an empty-quota line): 7-10 lines,
    # booleans; the rest stay false.
    for i in pref:
        lines[i]["preferential"] = True
    # The float shapes in the band a 750 kg consignment falls in, for two preferential lines,
    # and once more in an empty-quota line (so both deliverables carry them).
    for i, value in ((pref[0], TINY), (pref[1], SUM), (empty[0], SUM), (empty[1], TINY)):
        _band_for(lines[i]["bands"], 750)[2] = value
    # Every selection carries the string "true", a dotted/Unicode note key, an empty note object
    # and a deep origin block at least once.
    lines[pref[2]]["licence"] = "true"
    lines[empty[2]]["licence"] = "true"
    lines[empty[3]]["notes"] = {"TN.2027/14": NOTE_TEXTS[0], "Fußnote§3": NOTE_TEXTS[4]}
    lines[empty[4]]["notes"] = {}
    lines[empty[5]].setdefault("origin", _origin(rng))
    lines[pref[3]].setdefault("origin", _origin(rng))
    # A band boundary exactly at 750 kg (from inclusive, to exclusive) in a preferential line.
    lines[pref[4]]["bands"] = [[0, 750, rng.choice(RATES)], [750, None, rng.choice(RATES)]]
    return {
        "schedule": schedule,
        "revision": revision,
        "currency": "EUR",
        "valid": {"from": "2027-01-01", "to": None},
        "precision": {"rate_epsilon": TINY, "rounding": "half-even"},
        "line_count": len(lines),
        "lines": lines,
    }


def page_of(table: dict[str, Any], offset: int, limit: int) -> dict[str, Any]:
    """The page ``lines[offset:offset + limit]`` of a table: the table's other fields, the page's
    lines and a ``page`` block (``offset``, ``limit``, ``total`` lines of the table)."""
    page = {k: v for k, v in table.items() if k not in ("line_count", "lines")}
    page["page"] = {"offset": offset, "limit": limit, "total": len(table["lines"])}
    page["lines"] = table["lines"][offset:offset + limit]
    return page


def get_tariff_table(call: Call) -> Reply:
    schedule = call.args.get("schedule")
    if schedule not in SCHEDULES:
        return Reply(error={"code": "SCHEDULE_NOT_FOUND", "message": f"no tariff schedule {schedule!r}",
                            "data": {"known": list(SCHEDULES)}})
    tables = call.state.get("tables") or {}
    table = tables.get(schedule)
    if table is None:
        table = build_table(str(call.values["table_seed"]), str(call.values["revision"]), schedule)
        call.set(("tables", schedule), table)
    total = len(table["lines"])
    if "offset" not in call.args and "limit" not in call.args:
        text = (f"Tariff schedule {schedule}: {total} tariff lines in {table['currency']}. The revision and the "
                "lines themselves (HS codes, preference flags, licence status, quotas, weight bands with their "
                "rates, notes and origin rules) are in the structured result.")
        return Reply(result=table, text=text)
    offset, limit = int(call.args.get("offset", 0)), int(call.args.get("limit", MAX_PAGE))
    page = page_of(table, offset, limit)
    shown = len(page["lines"])
    text = (f"Tariff schedule {schedule}: tariff lines {offset + 1}-{offset + shown} of {total} in "
            f"{table['currency']}. The lines themselves are in the structured result.")
    return Reply(result=page, text=text)
