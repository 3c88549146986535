"""The built-in fake apps: settings, mail, shop checkout and file manager.

Each app draws its data (the goal's target plus distractors: other settings, mails, products and
files) and a goal from the RNG it is given, and derives its screens from that data. Texts are
ASCII-only except language names, so the default bitmap font can draw them in screenshots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from rlgym_envs.gui.app import App, Ctx, Element, Goal, Pred, back, clone, go, put


def _pick(rng: np.random.Generator, seq: Sequence[Any]) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _some(rng: np.random.Generator, seq: Sequence[Any], k: int) -> list[Any]:
    return [seq[int(i)] for i in rng.permutation(len(seq))[:k]]


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


# --- settings -------------------------------------------------------------------------------------


class Setting(NamedTuple):
    """One entry of a settings section: a switch, or a combobox over `values`."""

    key: str
    label: str
    phrase: str  # how a goal names it: "turn on <phrase>", "set <phrase> to <value>"
    values: tuple[str, ...] | None = None  # None: a switch


def _numbers(lo: int, hi: int, unit: str = "") -> tuple[str, ...]:
    return tuple(f"{n}{unit}" for n in range(lo, hi + 1))


TIMES = tuple(f"{m // 60:02d}:{m % 60:02d}" for m in range(0, 24 * 60, 5))
SNOOZE = ("1 minute", *(f"{n} minutes" for n in range(2, 31)))
LANGUAGES = (
    "English", "Deutsch", "Español", "Français", "Italiano", "Português", "Nederlands", "Svenska", "Norsk",
    "Dansk", "Suomi", "Polski", "Magyar", "Türkçe", "Català", "Galego", "Euskara", "Íslenska", "Eesti",
    "Hrvatski", "Srpski", "Bosanski", "Shqip", "Afrikaans", "Cymraeg", "Gaeilge", "Malti", "Lëtzebuergesch",
    "Føroyskt", "Bahasa Indonesia", "Bahasa Melayu", "Filipino", "Kiswahili", "Hausa", "Igbo", "isiZulu",
    "isiXhosa", "Setswana", "Kinyarwanda", "Soomaali", "Malagasy", "Gàidhlig", "Brezhoneg", "Rumantsch",
    "Esperanto", "Frysk", "Latina", "Occitan", "Corsu", "Sardu",
)  # fmt: skip
TIME_ZONES = (
    "Amsterdam", "Anchorage", "Athens", "Auckland", "Bangkok", "Beijing", "Berlin", "Bogota", "Brussels",
    "Buenos Aires", "Cairo", "Cape Town", "Caracas", "Chicago", "Copenhagen", "Dakar", "Denver", "Dhaka",
    "Dubai", "Dublin", "Helsinki", "Hong Kong", "Honolulu", "Istanbul", "Jakarta", "Jerusalem",
    "Johannesburg", "Kabul", "Karachi", "Kathmandu", "Kyiv", "Lagos", "Lima", "Lisbon", "London",
    "Los Angeles", "Madrid", "Manila", "Melbourne", "Mexico City", "Montreal", "Moscow", "Mumbai", "Nairobi",
    "New York", "Oslo", "Paris", "Perth", "Prague", "Reykjavik", "Riyadh", "Rome", "Santiago", "Sao Paulo",
    "Seoul", "Shanghai", "Singapore", "Stockholm", "Sydney", "Taipei", "Tehran", "Tokyo", "Toronto",
    "Vancouver", "Vienna", "Warsaw", "Wellington", "Zurich",
)  # fmt: skip

# section -> (title, settings), in screen order. A section screen shows all of its settings: at most
# four, at most two of them comboboxes, so a screen stays about as short as the first four sections were.
SETTINGS: dict[str, tuple[str, tuple[Setting, ...]]] = {
    "display": (
        "Display",
        (
            Setting("dark_mode", "Dark mode", "dark mode"),
            Setting("font_size", "Font size", "the font size", _numbers(8, 40)),
            Setting("brightness", "Brightness", "the brightness", _numbers(1, 100, "%")),
        ),
    ),
    "network": (
        "Network",
        (
            Setting("airplane_mode", "Airplane mode", "airplane mode"),
            Setting("wifi", "Wi-Fi", "Wi-Fi"),
            Setting("bluetooth", "Bluetooth", "Bluetooth"),
            Setting("data_warning", "Data warning", "the data warning", _numbers(1, 100, " GB")),
        ),
    ),
    "notifications": (
        "Notifications",
        (
            Setting("email_alerts", "Email alerts", "email alerts"),
            Setting("sounds", "Sounds", "notification sounds"),
            Setting("do_not_disturb", "Do not disturb", "do not disturb"),
        ),
    ),
    "general": (
        "General",
        (
            Setting("language", "Language", "the language", LANGUAGES),
            Setting("time_format", "Time format", "the time format", ("12-hour", "24-hour")),
        ),
    ),
    "sound": (
        "Sound",
        (
            Setting("media_volume", "Media volume", "the media volume", _numbers(0, 100)),
            Setting("ring_volume", "Ring volume", "the ring volume", _numbers(0, 100)),
            Setting("vibration", "Vibration", "vibration"),
        ),
    ),
    "battery": (
        "Battery",
        (
            Setting("battery_saver", "Battery saver", "battery saver"),
            Setting("saver_threshold", "Saver threshold", "the saver threshold", _numbers(5, 75, "%")),
            Setting("charge_limit", "Charge limit", "the charge limit", _numbers(50, 100, "%")),
        ),
    ),
    "quiet_hours": (
        "Quiet hours",
        (
            Setting("scheduled", "Scheduled", "scheduled quiet hours"),
            Setting("start", "Start", "the quiet hours start", TIMES),
            Setting("end", "End", "the quiet hours end", TIMES),
        ),
    ),
    "clock": (
        "Clock",
        (
            Setting("automatic_time", "Automatic time", "automatic time"),
            Setting("automatic_zone", "Automatic time zone", "the automatic time zone"),
            Setting("time_zone", "Time zone", "the time zone", TIME_ZONES),
        ),
    ),
    "alarms": (
        "Alarms",
        (
            Setting("alarm_volume", "Alarm volume", "the alarm volume", _numbers(0, 100)),
            Setting("snooze", "Snooze length", "the snooze length", SNOOZE),
            Setting("gradual_volume", "Gradual volume", "gradual volume"),
        ),
    ),
}
RADIO_OFF_WHEN_AIRPLANE = ("wifi", "bluetooth")  # disabled while airplane mode is on, as on real phones
SHOWN_OPTIONS = 5  # a combobox lists this many of its values: the current one, any goal value, and others


EVERY_SETTING = tuple((section, s) for section, (_, settings) in SETTINGS.items() for s in settings)
_SIZES = np.array([2 if s.values is None else len(s.values) for _, s in EVERY_SETTING])


def _shown(values: Sequence[str], needed: Sequence[int], draws: Sequence[int]) -> tuple[str, ...] | None:
    """`SHOWN_OPTIONS` of `values` (all when there are fewer) in their order: the `needed` indexes, then
    the first distinct `draws` (indexes); None when the draws repeat too much to fill the list."""
    if len(values) <= SHOWN_OPTIONS:
        return tuple(values)
    picked = list(dict.fromkeys([*needed, *draws]))[:SHOWN_OPTIONS]
    return tuple(values[i] for i in sorted(picked)) if len(picked) == SHOWN_OPTIONS else None


class SettingsApp(App):
    """Settings in nine sections; Wi-Fi and Bluetooth are disabled while airplane mode is on. A
    combobox lists `SHOWN_OPTIONS` of its values, drawn per episode like the shop's catalog: always
    the current one and the one a goal asks for.

    One-subgoal goals (a switch turned on or off, or one combobox value set) number 2 per switch and
    one per combobox value: 1,410 in all.
    """

    name: ClassVar[str] = "settings"
    title: ClassVar[str] = "Settings"

    def sample(self, rng: np.random.Generator) -> tuple[dict[str, Any], Goal]:
        # Few, batched draws: an env may redraw a goal many times until it fits its tier and split.
        data: dict[str, Any] = {"user": f"user{int(rng.integers(100, 1000))}@example.com"}
        data.update({section: {} for section in SETTINGS})
        current: list[int] = []  # each setting's value: an index into its values; 0 or 1 for a switch
        for (section, s), u in zip(EVERY_SETTING, rng.random(len(EVERY_SETTING)).tolist(), strict=True):
            current.append(int(u * (2 if s.values is None else len(s.values))))
            data[section][s.key] = bool(current[-1]) if s.values is None else s.values[current[-1]]
        targets = rng.permutation(len(EVERY_SETTING))[: int(rng.integers(1, 4))].tolist()
        preds, phrases, wanted = [], [], {}
        for i in targets:
            section, s = EVERY_SETTING[i]
            if s.values is None:
                value: Any = not current[i]
                phrases.append(f"turn {'on' if value else 'off'} {s.phrase}")
            else:
                wanted[i] = (current[i] + 1 + int(rng.integers(len(s.values) - 1))) % len(s.values)  # not current
                value = s.values[wanted[i]]
                phrases.append(f"set {s.phrase} to {value}")
            preds.append(Pred(f"{section}.{s.key}", "eq", value))
        draws = (rng.random((len(EVERY_SETTING), 2 * SHOWN_OPTIONS)) * _SIZES[:, None]).astype(int).tolist()
        data["choices"] = {section: {} for section in SETTINGS}
        for i, (section, s) in enumerate(EVERY_SETTING):
            if s.values is not None:
                needed = [current[i], wanted[i]] if i in wanted else [current[i]]
                shown = _shown(s.values, needed, draws[i])
                while shown is None:  # the draws repeated themselves
                    shown = _shown(s.values, needed, rng.integers(len(s.values), size=4 * SHOWN_OPTIONS).tolist())
                data["choices"][section][s.key] = shown  # a tuple (a JSON array): fixed, so states share it
        relevant = [p.path for p in preds]
        if any(p.path in {f"network.{k}" for k in RADIO_OFF_WHEN_AIRPLANE} for p in preds):
            relevant.append("network.airplane_mode")  # may have to go off to unlock the radio
        text = f"In Settings, {_join(phrases)}."
        return data, Goal(text, tuple(preds), tuple(dict.fromkeys(relevant)))

    def view(self, data: Mapping[str, Any], screen: str) -> list[Element]:
        if screen == "main":
            links = [Element("link", title, on_click=go(section)) for section, (title, _) in SETTINGS.items()]
            return [Element("text", f"Signed in as {data['user']}"), *links]
        elements = []
        for s in SETTINGS[screen][1]:
            bind = f"{screen}.{s.key}"
            disabled = screen == "network" and s.key in RADIO_OFF_WHEN_AIRPLANE and data["network"]["airplane_mode"]
            if s.values is None:
                elements.append(Element("switch", s.label, bind=bind, disabled=disabled))
            else:
                options = tuple(data["choices"][screen][s.key])
                elements.append(Element("combobox", s.label, bind=bind, options=options, disabled=disabled))
        return elements

    def screen_title(self, data: Mapping[str, Any], screen: str) -> str:
        return self.title if screen == "main" else f"{self.title} > {SETTINGS[screen][0]}"


# --- mail ---------------------------------------------------------------------------------------

CONTACTS = (
    ("Alice Martin", "alice.martin@example.com"),
    ("Bob Stone", "bob.stone@example.com"),
    ("Carla Diaz", "carla.diaz@example.com"),
    ("Deepak Rao", "deepak.rao@example.com"),
    ("Emma Weber", "emma.weber@example.com"),
    ("Felix Novak", "felix.novak@example.com"),
    ("Grace Kim", "grace.kim@example.com"),
    ("Hugo Petit", "hugo.petit@example.com"),
)
SUBJECTS = (
    "Quarterly report",
    "Lunch on Friday",
    "Project kickoff",
    "Invoice 4711",
    "Team offsite",
    "Weekly sync notes",
    "Travel plans",
    "Budget review",
    "Holiday schedule",
    "Server maintenance",
    "Design feedback",
    "Welcome aboard",
)
BODIES = (
    "See you there.",
    "Thanks, got it.",
    "Can we move it to Monday?",
    "Please find the numbers attached.",
    "Sounds good to me.",
    "I will send the draft tomorrow.",
)
EMPTY_DRAFT = {"to": "", "subject": "", "body": ""}


def _send(ctx: Ctx) -> None:
    ctx.data["sent"].append(clone(ctx.data["draft"]))
    ctx.data["draft"] = clone(EMPTY_DRAFT)
    ctx.back()


def _delete_open_mail(ctx: Ctx) -> None:
    del ctx.data["inbox"][ctx.data["open"]]
    ctx.data["open"] = -1
    ctx.back()


class MailApp(App):
    """An inbox with distractor mails; compose, reply, send, delete."""

    name: ClassVar[str] = "mail"
    title: ClassVar[str] = "Mail"

    def sample(self, rng: np.random.Generator) -> tuple[dict[str, Any], Goal]:
        subjects = _some(rng, SUBJECTS, int(rng.integers(5, 10)))
        inbox = []
        for subject in subjects:
            name, address = _pick(rng, CONTACTS)
            inbox.append({"from": name, "address": address, "subject": subject, "body": _pick(rng, BODIES)})
        data = {"inbox": inbox, "sent": [], "draft": clone(EMPTY_DRAFT), "open": -1}
        body = _pick(rng, BODIES)
        if rng.random() < 0.5:
            mail = _pick(rng, inbox)
            to, subject = mail["address"], f"Re: {mail['subject']}"
            text = f"In Mail, reply to the email from {mail['from']} about '{mail['subject']}' with the text '{body}'."
            with_body = True
        else:
            to, subject = _pick(rng, CONTACTS)[1], _pick(rng, SUBJECTS)
            with_body = bool(rng.integers(2))
            text = f"In Mail, send an email to {to} with the subject '{subject}'"
            text += f" and the text '{body}'." if with_body else "."
        fields = [{"to": to}, {"to": to, "subject": subject}]
        if with_body:
            fields.append({"to": to, "subject": subject, "body": body})
        preds = tuple(Pred("sent", "contains", f) for f in fields)
        return data, Goal(text, preds, relevant=("draft", "sent", "open"))

    def view(self, data: Mapping[str, Any], screen: str) -> list[Element]:
        if screen == "main":
            mails = [
                Element(
                    "listitem", f"{m['from']}: {m['subject']}", on_click=(put("open", i), go("message")), scrolls=True
                )
                for i, m in enumerate(data["inbox"])
            ]
            return [
                Element("button", "Compose", on_click=(put("draft", EMPTY_DRAFT), go("compose"))),
                Element("button", "Sent", on_click=go("sent")),
                *mails,
            ]
        if screen == "sent":
            sent = [Element("text", f"To {m['to']}: {m['subject']}", scrolls=True) for m in data["sent"]]
            return sent or [Element("text", "No sent mail")]
        if screen == "message":
            m = data["inbox"][data["open"]]
            reply = {"to": m["address"], "subject": f"Re: {m['subject']}", "body": ""}
            return [
                Element("text", f"From: {m['from']} <{m['address']}>"),
                Element("text", f"Subject: {m['subject']}"),
                Element("text", m["body"]),
                Element("button", "Reply", on_click=(put("draft", reply), go("compose"))),
                Element("button", "Delete", on_click=_delete_open_mail),
            ]
        return [
            Element("textbox", "To", bind="draft.to"),
            Element("textbox", "Subject", bind="draft.subject"),
            Element("textbox", "Body", bind="draft.body"),
            Element("button", "Send", on_click=_send, disabled=not data["draft"]["to"].strip()),
            Element("button", "Discard", on_click=(put("draft", EMPTY_DRAFT), back())),
        ]


# --- shop ---------------------------------------------------------------------------------------

PRODUCTS = (
    ("Backpack", 5900),
    ("Coffee mug", 900),
    ("Desk lamp", 2400),
    ("Headphones", 7900),
    ("Keyboard", 4900),
    ("Notebook", 450),
    ("Phone case", 1900),
    ("Plant pot", 1200),
    ("Sunglasses", 3500),
    ("USB cable", 800),
    ("Umbrella", 2100),
    ("Wall clock", 3200),
    ("Water bottle", 1500),
    ("Yoga mat", 2800),
)
QUANTITIES = ("1", "2", "3", "4", "5")
SHIPPING = ("Standard", "Express", "Overnight")
DEFAULT_CHECKOUT = {"qty": "1", "shipping": "Standard", "agree": False}


def _money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def _place_order(ctx: Ctx) -> None:
    co = ctx.data["checkout"]
    ctx.data["orders"].append({"item": ctx.data["item"], "qty": co["qty"], "shipping": co["shipping"]})
    ctx.data["checkout"] = clone(DEFAULT_CHECKOUT)
    ctx.data["item"] = ""
    ctx.root()


class ShopApp(App):
    """A catalog longer than one page, product pages and a checkout form with a terms checkbox."""

    name: ClassVar[str] = "shop"
    title: ClassVar[str] = "Shop"

    def sample(self, rng: np.random.Generator) -> tuple[dict[str, Any], Goal]:
        catalog = sorted(_some(rng, PRODUCTS, int(rng.integers(7, 12))))
        data = {
            "catalog": [{"name": n, "price": p} for n, p in catalog],
            "orders": [],
            "item": "",
            "checkout": clone(DEFAULT_CHECKOUT),
        }
        item, qty, shipping = _pick(rng, catalog)[0], _pick(rng, QUANTITIES), _pick(rng, SHIPPING)
        text = f"In Shop, buy {qty} x {item} with {shipping.lower()} shipping, in a single order."
        order = {"item": item, "qty": qty, "shipping": shipping}
        preds = (
            Pred("orders", "contains", {"item": item}),
            Pred("orders", "contains", {"item": item, "qty": qty}),
            Pred("orders", "contains", order),
            Pred("orders", "len", 1),
        )
        return data, Goal(text, preds, relevant=("item", "checkout", "orders"))

    def view(self, data: Mapping[str, Any], screen: str) -> list[Element]:
        if screen == "main":
            products = [
                Element(
                    "listitem",
                    f"{p['name']} - {_money(p['price'])}",
                    on_click=(put("item", p["name"]), go("item")),
                    scrolls=True,
                )
                for p in data["catalog"]
            ]
            return [Element("button", "Orders", on_click=go("orders")), *products]
        if screen == "orders":
            orders = [
                Element("text", f"{o['qty']} x {o['item']}, {o['shipping']} shipping", scrolls=True)
                for o in data["orders"]
            ]
            return orders or [Element("text", "No orders yet")]
        price = next(p["price"] for p in data["catalog"] if p["name"] == data["item"])
        if screen == "item":
            return [
                Element("text", data["item"]),
                Element("text", f"Price: {_money(price)}"),
                Element("button", "Buy now", on_click=(put("checkout", DEFAULT_CHECKOUT), go("checkout"))),
            ]
        co = data["checkout"]
        return [
            Element("text", f"Item: {data['item']}"),
            Element("combobox", "Quantity", bind="checkout.qty", options=QUANTITIES),
            Element("combobox", "Shipping", bind="checkout.shipping", options=SHIPPING),
            Element("text", f"Total: {_money(price * int(co['qty']))}"),
            Element("checkbox", "I agree to the terms", bind="checkout.agree"),
            Element("button", "Place order", on_click=_place_order, disabled=not co["agree"]),
        ]


# --- files --------------------------------------------------------------------------------------

FOLDERS = ("Archive", "Documents", "Downloads", "Invoices", "Music", "Photos", "Projects", "Recipes")
FILES = (
    "backup.zip", "birthday.jpg", "budget.xlsx", "contract.pdf", "data.csv", "draft_v2.docx",
    "holiday.jpg", "invoice_0423.pdf", "letter.docx", "logo.png", "manual.pdf", "meeting_notes.txt",
    "mixtape.mp3", "notes.txt", "photo_beach.jpg", "plan.md", "podcast.mp3", "poster.png", "readme.md",
    "recipe_pasta.txt", "report_q3.pdf", "resume.docx", "scan_001.png", "script.py", "sketch.svg",
    "slides.pptx", "song.mp3", "tax_2023.pdf", "timeline.xlsx", "todo.txt",
)  # fmt: skip
TRASH = "Trash"


def _move_open_file(to: str | None):
    def move(ctx: Ctx) -> None:
        d = ctx.data
        target = d["target"] if to is None else to
        d["folders"][d["folder"]].remove(d["file"])
        d["folders"][target] = sorted([*d["folders"][target], d["file"]])  # sorted: one state per content
        d["file"], d["target"] = "", ""
        ctx.back()

    return move


class FilesApp(App):
    """Folders of files (long folders scroll), a file page with Move to / Delete, and a Trash."""

    name: ClassVar[str] = "files"
    title: ClassVar[str] = "Files"

    def sample(self, rng: np.random.Generator) -> tuple[dict[str, Any], Goal]:
        folders = sorted(_some(rng, FOLDERS, 4))
        names = _some(rng, FILES, len(FILES))
        tree: dict[str, list[str]] = {}
        for folder in folders:
            n = int(rng.integers(2, 8))
            tree[folder], names = sorted(names[:n]), names[n:]
        tree[TRASH] = []
        data = {"folders": tree, "folder": "", "file": "", "target": ""}
        source = _pick(rng, folders)
        file = _pick(rng, tree[source])
        dest = _pick(rng, [f for f in folders if f != source])
        preds = (Pred(f"folders.{dest}", "contains", file), Pred(f"folders.{source}", "excludes", file))
        text = f"In Files, move '{file}' from {source} to {dest}."
        return data, Goal(text, preds, relevant=("folders", "folder", "file", "target"))

    def view(self, data: Mapping[str, Any], screen: str) -> list[Element]:
        tree = data["folders"]
        if screen == "main":
            order = [*sorted(f for f in tree if f != TRASH), TRASH]
            return [
                Element("listitem", f"{f} ({len(tree[f])} files)", on_click=(put("folder", f), go("folder")))
                for f in order
            ]
        if screen == "folder":
            files = [
                Element("listitem", f, on_click=(put("file", f), put("target", ""), go("file")), scrolls=True)
                for f in tree[data["folder"]]
            ]
            return files or [Element("text", "This folder is empty")]
        here = data["folder"]
        return [
            Element("text", f"Name: {data['file']}"),
            Element("text", f"Location: {here}"),
            Element(
                "combobox", "Move to", bind="target", options=tuple(f for f in sorted(tree) if f not in (here, TRASH))
            ),
            Element("button", "Move", on_click=_move_open_file(None), disabled=not data["target"]),
            Element("button", "Delete", on_click=_move_open_file(TRASH), disabled=here == TRASH),
        ]

    def screen_title(self, data: Mapping[str, Any], screen: str) -> str:
        if screen in ("folder", "file"):
            return f"{self.title} > {data['folder']}" + (f" > {data['file']}" if screen == "file" else "")
        return super().screen_title(data, screen)


DEFAULT_APPS: tuple[App, ...] = (SettingsApp(), MailApp(), ShopApp(), FilesApp())
