"""One name and one colour per tape object, and one label per tensor (`tapekit.ids`), in every
printout and picture: ``print(tape)``, ``repr``, ``tk.tapes``, ``tk.explain`` and warnings, the DAG
and its legend, snapshots and the partition plot, gradient splits and their figure, and the
explorer, the merge viewer and the backward player, at several moments of the tutorials' programs
(P4 in both orders, tutorial 5's four-policy comparison, the tour's MLP)."""

from __future__ import annotations

import re
import warnings
from collections import defaultdict

import matplotlib
import numpy as np
import pytest

import tapekit as tk
from tapekit.ids import TAPE_COLOURS, label, letter_number
from tapekit.viz.palette import CONSUMED

from .dot_helpers import nodes
from .programs import p4, p4_run, p5, three_outputs

viz = tk.viz
NAME = r"[A-Z]+(?:∪[A-Z]+)*(?:∪… \d+ tapes)?"
POLICY = r"(?:Owned|Arc|Union|Global)Tape"
hex_ = lambda colour: matplotlib.colors.to_hex(colour).upper()  # noqa: E731


class Seen:
    """Every tape name, tape colour and tensor label the printouts and pictures of one program
    showed, and what they said each tensor holds."""

    def __init__(self) -> None:
        self.colours: dict[str, set[str]] = defaultdict(set)  # tape name -> the colours it was drawn in
        self.holds: dict[str, set[str]] = defaultdict(set)  # tensor label -> names of the tape it holds
        self.labels: dict[str, set[str]] = defaultdict(set)  # record "op(args)" -> its output's labels
        self.names: set[str] = set()  # every tape name printed
        self.confirmed = 0  # how many times a picture said which tape a tensor holds, and was right

    # -- text ---------------------------------------------------------------------------------
    def text(self, text: str) -> None:
        """A printout or message: the tapes it names, what it says each tensor holds or carries."""
        self.names |= set(re.findall(rf"(?:{POLICY}|tape) ({NAME})\b", text))
        for who, name in re.findall(rf"(\S+)'s history \(holds tape ({NAME})\)", text):
            self.holds[who].add(name)
        for who, name in re.findall(rf"(\S+) carries {POLICY} ({NAME})", text):
            self.holds[who].add(name)
        for out, call in re.findall(r"^\s*(\S+) = (\w+\([^)]*\))", text, re.M):  # print(tape): a program
            self.labels[call].add(out)

    # -- pictures -----------------------------------------------------------------------------
    def dot(self, dot: str) -> None:
        """A DAG (or a widget's): its legend's tapes and colours, its tensors, what outputs carry."""
        self.text(dot.replace("<BR/>", " "))
        for colour, name in re.findall(rf'BGCOLOR="(#\w+)"[^>]*>(?:</TD>)?(?:<TD[^>]*>)?tape ({NAME}):', dot):
            self.colours[name].add(colour.upper())
        drawn = [re.search(r'label="([^"|]+)\|', a)[1] for k, a in nodes(dot).items() if re.fullmatch(r"n\d+", k)]
        assert len(drawn) == len(set(drawn)), f"two tensors share a label: {drawn}"
        for key, attrs in nodes(dot).items():  # an output's thick outline: the tape it carries
            if re.fullmatch(r"n\d+", key) and "penwidth=3" in attrs:
                who = re.search(r'label="([^"|]+)\|', attrs)[1]
                self.holds.setdefault(who + " (outline)", set()).add(re.search(r'\bcolor="(#\w+)"', attrs)[1].upper())

    def partition(self, fig) -> None:
        """A partition plot: each panel's tape bars and labels, and the figure's legend."""
        for ax in fig.axes:
            ticks = [t.get_text() for t in ax.get_yticklabels()]
            tapes = [t for t in ticks if t.startswith("tape ")]
            for tick, patch in zip(tapes, ax.patches):
                self.colours[re.match(rf"tape ({NAME})", tick)[1]].add(hex_(patch.get_facecolor()))
            self.text("\n".join(ticks).replace("\n", " "))
        self._legend(fig)

    def split_figure(self, fig) -> None:
        self._legend(fig)

    def _legend(self, fig) -> None:
        for text, patch in zip(fig.legends[0].get_texts(), fig.legends[0].get_patches()):
            found = re.match(rf"tape ({NAME})", text.get_text())
            if found:
                self.colours[found[1]].add(hex_(patch.get_facecolor()))

    # -- the checks ---------------------------------------------------------------------------
    def moment(self, tensors: dict[str, tk.Tensor]) -> None:
        """What was shown since the last moment said each tensor holds the tape object it holds now,
        by its name and in its colour."""
        for who, t in tensors.items():
            tape = t.tape
            live = tape is not None and tape.policy != "spent" and tape._spent is None
            if not live:
                continue
            assert self.holds.get(t.label, {tape.label}) == {tape.label}, (who, self.holds.get(t.label))
            self.confirmed += (t.label in self.holds) + (t.label + " (outline)" in self.holds)
            outline = self.holds.get(t.label + " (outline)", {tape.colour.upper()})
            assert outline == {tape.colour.upper()}, (who, outline)
            if tape.label in self.colours:
                assert self.colours[tape.label] == {tape.colour.upper()}
        self.holds.clear()

    def check(self, tensors: dict[str, tk.Tensor] | None = None) -> None:
        """Each tape name: one colour, all life long; each record's output: one label."""
        if tensors is not None:
            self.moment(tensors)
        for name, colours in self.colours.items():
            assert len(colours) == 1, f"tape {name} is drawn in {colours}"
        for call, outs in self.labels.items():
            assert len(outs) == 1, f"{call} made {outs}"
        for name in self.names | set(self.colours):
            first = name.split("∪")[0]
            for colours in [self.colours.get(name)] if name in self.colours else []:
                assert colours <= set(TAPE_COLOURS) | {CONSUMED}
            assert re.fullmatch(r"[A-Z]+", first)


def show_all(seen: Seen, tensors: dict[str, tk.Tensor], outputs: list[tk.Tensor], split: bool = True) -> None:
    """Every printout and picture of ``outputs`` now."""
    for t in tensors.values():
        seen.text(repr(t))
        if t.tape is not None:
            seen.text(str(t.tape))
            seen.text(repr(t.tape))
    seen.text(str(tk.tapes(*outputs)))
    for out in outputs:
        seen.text(str(tk.explain(out)))
    seen.dot(viz.dag(*outputs, names=tensors).source)
    snap = viz.snapshot(*outputs, names=tensors)
    seen.text(str(snap))
    seen.partition(viz.plot_partition(snap))
    if split:
        cut = viz.gradient_split(*outputs, names=tensors)
        seen.text(str(cut))
        if cut.parts:
            seen.split_figure(viz.plot_gradient_split(cut))
    seen.moment(tensors)


def backward_text(*outputs: tk.Tensor) -> str:
    """What a backward on each output says (its warnings and errors)."""
    said = []
    for out in outputs:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out.backward(seed=np.ones(out.shape), retain=True)
            except tk.TapekitError as err:
                said.append(str(err))
        said += [str(w.message) for w in caught]
    return "\n".join(said)


@pytest.mark.parametrize("zz_first", [True, False], ids=["zz first", "z first"])
def test_p4_run_directly_names_each_tape_and_tensor_alike_at_every_moment(zz_first):
    dev, seen = tk.Cpu(), Seen()
    x = dev.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = dev.tensor([4., 5.], name="y").trace(tk.ArcTape())
    show_all(seen, {"x": x, "y": y}, [x, y], split=False)  # traced, nothing recorded
    first = y * 2.0 if zz_first else x + y
    show_all(seen, {"x": x, "y": y, "first": first}, [first])
    second = x + y if zz_first else y * 2.0
    z, zz = (second, first) if zz_first else (first, second)
    tensors = {"x": x, "y": y, "z": z, "zz": zz}
    show_all(seen, tensors, [z, zz])  # after the merge
    seen.text(backward_text(zz))
    show_all(seen, tensors, [z, zz])
    seen.check(tensors)
    a, b = x.tape.label, y.tape.label
    assert a != b and z.tape.label == a and zz.tape.label == b  # A absorbed B, and B lives on, emptied
    assert seen.colours[a] == {x.tape.colour.upper()} and seen.colours[b] == {y.tape.colour.upper()}
    z.backward(seed=np.ones(2))  # drains tape A
    show_all(seen, tensors, [z, zz], split=False)
    seen.check(tensors)
    assert f"drained by the backward on {z.label}" in str(z.tape)


def test_the_union_of_two_tapes_has_one_name_for_every_holder():
    dev, seen = tk.Cpu(), Seen()
    x = dev.tensor([1., 2.], name="x").trace(tk.UnionTape())
    y = dev.tensor([4., 5.], name="y").trace(tk.UnionTape())
    show_all(seen, {"x": x, "y": y}, [x, y], split=False)
    a, b = x.tape.label, y.tape.label
    zz, z = y * 2.0, x + y
    tensors = {"x": x, "y": y, "z": z, "zz": zz}
    show_all(seen, tensors, [z, zz])
    seen.check(tensors)
    assert {t.tape.label for t in tensors.values()} == {f"{a}∪{b}"}
    assert z.tape.colour == x.tape.colour  # the union keeps its first tape's colour
    tk.backward([z.sum(), zz.sum()])
    show_all(seen, tensors, [z, zz], split=False)
    seen.check(tensors)


def test_a_union_that_grows_keeps_its_first_letter_and_colour():
    """A union of more tapes than its name shows names those with the first letters: the last tape
    made, lettered first, stays in its name and colour as the union grows (it was dropped for the
    first three made, and the union turned from blue to orange in the middle of a picture)."""
    dev = tk.Cpu()
    xs = [dev.tensor([1., 2.], name=f"x{i}").trace(tk.UnionTape()) for i in range(6)]
    first = xs[5].tape.label  # made last, shown first
    for x in xs[:5]:
        x.tape.label
    z = xs[5] * 1.0
    names, colours = [], []
    for x in xs[:5]:
        z = z + x
        names.append(z.tape.label)
        colours.append(z.tape.colour)
    assert all(name.startswith(f"{first}∪") for name in names), names
    assert set(colours) == {xs[5].tape.colour}
    assert names[-1].endswith("∪… 6 tapes")


@pytest.mark.parametrize("policy", [tk.ArcTape, tk.OwnedTape])
def test_an_absorbing_tape_lists_the_tapes_it_absorbed_as_a_union_of_them_is_named(policy):
    """'absorbed B, C, D and 2 other tapes' names the tapes a union of the same ones names: those
    with the first letters (a tape made last, lettered first, is not left among 'other tapes')."""
    dev = tk.Cpu()
    xs = [dev.tensor([1., 2.], name=f"x{i}").trace(policy()) for i in range(6)]
    last = xs[5].tape.label  # made last, lettered first
    z = xs[0] * 1.0
    for x in xs[1:]:
        z = z + x
    found = re.search(r"absorbed ([A-Z, ]+) and 2 other tapes", repr(z.tape))
    assert found, repr(z.tape)
    listed = found.group(1).split(", ")
    assert last in listed and listed == sorted(listed, key=lambda name: (len(name), name)), listed


def test_two_global_tapes_named_together_are_lettered_in_the_order_they_were_made():
    """The error for an op between two GlobalTapes shows both: the one made first gets the first
    letter (they were lettered in the order the message named them)."""
    dev = tk.Cpu()
    first, second = tk.GlobalTape(), tk.GlobalTape()
    with second:
        y = dev.tensor([1., 2.]).trace(second) * 2.0
    with first:
        x = dev.tensor([1., 2.]).trace(first) * 3.0
    with pytest.raises(tk.TapePolicyError) as err:
        y + x
    assert f"({second.label} and {first.label})" in str(err.value)
    assert letter_number(first._born) < letter_number(second._born)


def _rebinds(tape):
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tape())
    h = x * 2.0
    h = h + 1.0  # noqa: F841  (the variable now names another tensor)


def test_a_variable_bound_twice_in_a_replayed_program_names_two_tensors_apart():
    """``h = x * 2; h = h + 1``: each tensor gets a name of its own (both were called h in the
    explorer's picture and in the tape's printout)."""
    explorer = tk.widgets.TapeExplorer(_rebinds, policy="union")
    explorer.step.value = explorer.step.max
    assert re.findall(r'\bn\d+ \[label="([^"|]+)\|', explorer.dot) == ["x", "h", "h_2"]
    printed = str(tk.widgets.Replay(_rebinds, "union").run(None).tensors["h"].tape)
    assert "h = mul(x, const)" in printed and "h_2 = add(h, const)" in printed


def test_an_owned_tape_a_backward_on_several_outputs_took_is_consumed_on_every_handle():
    """``tk.backward([a, b])`` merges b's OwnedTape into a's and consumes it: its handle says so,
    as ``b`` does (it said the tape was moved into the output of an op called backward)."""
    dev = tk.Cpu()
    x, y = dev.tensor([1., 2.]).trace(), dev.tensor([3., 4.]).trace()
    a, b = (x * 2.0).sum(), (y * 3.0).sum()
    held = b.tape
    tk.backward([a, b])
    assert "consumed by the backward on" in repr(held) and "consumed by the backward on" in repr(b)
    assert "moved" not in repr(held)


def test_tutorial_5s_four_policies_name_each_run_alike_in_every_picture_and_widget():
    seen_by_policy = {}
    snaps, splits = [], []
    for policy in tk.widgets.POLICIES:
        seen = seen_by_policy[policy] = Seen()
        replay = tk.widgets.Replay(three_outputs, policy)
        for step in range(1, replay.steps + 1):
            moment = replay.run(step)
            outputs = moment.outputs()
            if outputs:
                show_all(seen, moment.tensors, outputs, split=False)
        end = replay.run(None)
        shown = [end.tensors[o] for o in ("a", "b", "c") if o in end.tensors]
        snaps.append(viz.snapshot(*shown, label=policy, names=end.tensors))
        splits.append(viz.gradient_split(*shown, label=policy, names=end.tensors))
        for text in (str(snaps[-1]), str(splits[-1])):
            seen.text(text)
        explorer = tk.widgets.TapeExplorer(three_outputs, policy=policy, step=1)
        for step in range(1, explorer.step.max + 1):
            explorer.step.value = step
            seen.dot(explorer.dot)
            if explorer.figure is not None:
                seen.partition(explorer.figure)
            seen.moment(explorer.moment.tensors)
        if "b" in end.tensors:
            explorer.output.value = "b"
            explorer.run_backward()
            seen.text(explorer.report_text)
        viewer = tk.widgets.MergeViewer(three_outputs, policy=policy)
        seen.dot(viewer.after_dot)
        seen.moment(tk.widgets.Replay(three_outputs, policy).run(viewer.step.value).tensors)
        seen.dot(viewer.before_dot)
        seen.partition(viewer.figure)
        seen.moment(tk.widgets.Replay(three_outputs, policy).run(viewer.step.value - 1).tensors)
        player = tk.widgets.BackwardPlayer(three_outputs, policy=policy, output=shown[-1].label)
        player_end = tk.widgets.Replay(three_outputs, policy).run(None)
        after = tk.widgets.Replay(three_outputs, policy).run(None)  # the last step shows what the backward left
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            after.tensors[shown[-1].label].sum().backward()
        for step in range(player.step.max + 1):
            player.step.value = step
            seen.dot(player.dot)
            seen.text(player.text)
            seen.moment(player_end.tensors if step < player.step.max else after.tensors)
        seen.check(end.tensors)
        assert seen.confirmed > 10  # the pictures did say which tape the outputs hold
    seen_all = Seen()
    seen_all.partition(viz.plot_partition(*snaps))
    seen_all.split_figure(viz.plot_gradient_split(*splits))
    for snap in snaps:
        seen_all.text(str(snap))
    names = [set(s.colours) | s.names for s in seen_by_policy.values()]
    for i, one in enumerate(names):  # each policy's run is another program: no name is shared
        for other in names[i + 1:]:
            assert not {n for n in one for part in n.split("∪")} & {p for n in other for p in n.split("∪")}
    merged = defaultdict(set)
    for s in [*seen_by_policy.values(), seen_all]:
        for name, colours in s.colours.items():
            merged[name] |= colours
    assert all(len(c) == 1 for c in merged.values()), merged


def test_tape_and_tensor_names_of_a_replayed_program_do_not_depend_on_what_ran_before():
    first = tk.widgets.Replay(p4, "arc").run(None)
    names = {k: (t.label, t.tape.label) for k, t in first.tensors.items()}
    for _ in range(3):
        tk.Cpu().tensor([1.]).trace(tk.ArcTape()).tape.label  # other tapes shown in between
    again = tk.widgets.Replay(p4, "arc").run(None)
    assert {k: (t.label, t.tape.label) for k, t in again.tensors.items()} == names
    assert str(viz.dag(*again.outputs())) == str(viz.dag(*first.outputs()))


def test_the_tours_mlp_names_its_tape_alike_in_its_printout_dag_and_plots():
    dev, seen = tk.Cpu(seed=0), Seen()
    x = dev.tensor(np.linspace(-3, 3, 8).reshape(-1, 1), name="x")
    y = dev.tensor(np.sin(x.numpy()), name="sin(x)")
    model = tk.nn.Sequential(tk.nn.Linear(1, 4, device=dev), tk.nn.Tanh(), tk.nn.Linear(4, 1, device=dev))
    for _ in range(20):  # a training loop makes tapes no one shows: they take no letters
        tk.mse_loss(model.trace(tk.UnionTape())(x), y).backward()
    for name, parameter in model.named_parameters():
        parameter.name = name
    loss = tk.mse_loss(model.trace(tk.UnionTape())(x), y)
    loss.name = "loss"
    tensors = {"loss": loss}
    seen.dot(viz.dag(loss).source)
    assert seen.holds["loss (outline)"] == {loss.tape.colour.upper()}
    show_all(seen, tensors, [loss])
    grads = loss.backward()
    seen.text(repr(grads))
    seen.dot(viz.dag(loss, grads=grads).source)
    show_all(seen, tensors, [loss], split=False)
    seen.check(tensors)
    assert "layers.0.weight" in str(viz.dag(loss).source) and "UnionTape" in repr(loss.tape)
    assert "drained by the backward on loss, records again" in viz.dag(loss).source.replace("<BR/>", " ")


def test_a_tensor_has_one_label_in_print_tape_errors_and_pictures():
    dev = tk.Cpu()
    x = dev.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = dev.tensor([4., 5.], name="y").trace(tk.ArcTape())
    h = x * y  # unnamed
    out = (h + y).sum()
    shown = label(h.id)
    assert re.fullmatch(r"t\d+", shown)
    assert f"{shown} = mul(x, y)" in str(out.tape)
    assert f'label="{shown}|(2,)' in viz.dag(out).source
    assert f"{shown} = mul(x, y)" in str(tk.explain(out))
    assert shown in repr(tk.backward([out], seeds=[1.0]))
    assert label(h.id) == shown and h.label == shown


def test_gradients_summarise_many_entries_as_numpy_summarises_a_long_array():
    dev = tk.Cpu()
    xs = [dev.tensor([float(i)]).trace(tk.UnionTape()) for i in range(1002)]
    grads = tk.backward([tk.stack(xs).sum()])
    text = repr(grads)
    assert len(grads) > 1002 and text.startswith(f"Gradients({len(grads)} entries, leaves=all; ") and ", ..., " in text
    assert text.count(": (") == 6 and len(text) < 300
    few = repr(tk.backward([(dev.tensor([1.], name="w").trace() * 2.0).sum()]))
    assert few.startswith("Gradients(3 entries") and "..." not in few and "w: (1,)" in few
    assert repr(tk.Gradients()) == "Gradients(0 entries, leaves=all)"


def test_printouts_say_1_record_not_1_records():
    x = tk.Cpu().tensor([1.], name="x").trace(tk.ArcTape())
    y = x * 2.0
    for text in (str(y.tape), repr(y.tape), str(tk.explain(y)), viz.dag(y).source, str(viz.snapshot(y))):
        assert not re.search(r"(?<![/\d])1 records", text) and "1 record" in text, text


@pytest.mark.parametrize("program", [p4, p5], ids=["p4", "p5"])
def test_leaves_are_outlined_alike_in_every_picture(program):
    for policy in ("arc", "union"):
        explorer = tk.widgets.TapeExplorer(program, policy=policy)
        viewer = tk.widgets.MergeViewer(program, policy=policy)
        player = tk.widgets.BackwardPlayer(program, policy=policy, output="z")
        end = tk.widgets.Replay(program, policy).run(None)
        dots = [explorer.dot, viewer.before_dot, viewer.after_dot, player.dot,
                viz.dag(*end.outputs(), names=end.tensors).source]
        for dot in dots:
            for leaf in ("x", "y"):
                attrs = [a for a in nodes(dot).values() if re.search(rf'label="{leaf}\|', a)]
                assert len(attrs) == 1 and "fillcolor=white" in attrs[0] and "penwidth=1.5" in attrs[0], (leaf, dot)
                assert "Bold" not in attrs[0] and 'color="#333333"' not in attrs[0]


@pytest.mark.parametrize("shown_by", ["tapes", "dag"])
@pytest.mark.parametrize("policy", [tk.ArcTape, tk.OwnedTape, tk.UnionTape])
def test_tapes_first_shown_together_are_lettered_in_the_order_they_were_made_when_one_was_absorbed(shown_by, policy):
    """a's tape absorbs b's, c's stays apart: the first picture or table to show them names the
    three in the order they were made, the absorbed one included (its name is in a's state)."""
    dev = tk.Cpu()
    a, b, c = (dev.tensor([float(i)]).trace(policy()) for i in range(3))
    births = [t.tape._born for t in (a, b, c)]
    z = a + b
    w = c * 2.0
    if shown_by == "tapes":
        str(tk.tapes(z, w))
    else:
        viz.dag(z, w).source
    numbers = [letter_number(birth) for birth in births]
    assert numbers == sorted(numbers), numbers


@pytest.mark.parametrize("shown_by", ["print(grads)", "explain", "warning"])
def test_tensors_first_shown_together_are_labelled_in_the_order_they_were_made(shown_by):
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tk.ArcTape())
    y = dev.tensor([4., 5.])
    h = (x * y).exp()
    if shown_by == "warning":  # the records of h's history are let go, so a later backward misses them
        h.sum().backward()
    loss = (h * h).sum()
    made = [x.id, y.id, h.id, loss.id]
    if shown_by == "print(grads)":
        repr(loss.backward())
    elif shown_by == "explain":
        str(tk.explain(loss))
    else:
        with pytest.warns(tk.IncompleteTapeWarning):
            loss.backward()
    shown = [int(label(tid)[1:]) for tid in made]
    assert shown == sorted(shown), [label(tid) for tid in made]


@pytest.mark.parametrize("silence", ["simplefilter", "filterwarnings by module", "ignore every warning"])
def test_a_silenced_warning_hands_out_no_letter_or_label(silence):
    """A warning nobody sees names nothing: tutorial 4 silences a partial backward's warning, and the
    next tapes it showed were H and I, with F and G shown nowhere."""
    x, y, z, zz = p4_run(tk.ArcTape)
    loss = (zz * 1.0).sum()
    shown = letter_number(x.tape._born)
    with warnings.catch_warnings(record=True) as caught:
        if silence == "simplefilter":
            warnings.simplefilter("ignore", tk.IncompleteTapeWarning)
        elif silence == "filterwarnings by module":
            warnings.filterwarnings("ignore", category=tk.IncompleteTapeWarning, module=__name__)
        else:
            warnings.simplefilter("ignore")
        loss.backward()
    assert caught == []
    fresh = tk.ArcTape()
    assert letter_number(fresh._born) == shown + 1, "a letter went to a tape only the silenced warning named"
    assert letter_number(y.tape._born) == shown + 2


def test_a_warning_filtered_by_its_text_or_recorded_still_names_its_tapes():
    """Only a filter that ignores the warning whatever its text stops it being written."""
    x, y, z, zz = p4_run(tk.ArcTape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="no such text", category=tk.IncompleteTapeWarning)
        (zz * 1.0).sum().backward()
    assert len(caught) == 1 and f"tape {y.tape.label}" not in str(caught[0].message)
    assert re.search(r"\(on tape [A-Z]+\)", str(caught[0].message))


def test_the_two_tensors_of_a_policy_error_are_labelled_in_the_order_they_were_made():
    """``y + x`` with x made first: the message named y first, so y was t1 and x t2."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tk.UnionTape())
    y = dev.tensor([3., 4.]).trace(tk.ArcTape())
    with pytest.raises(tk.TapePolicyError) as err:
        y + x
    assert int(x.label[1:]) < int(y.label[1:])
    assert f"{y.label} carries an ArcTape and {x.label} a UnionTape" in str(err.value)


def test_the_tensors_a_moved_tape_message_names_are_labelled_in_the_order_they_were_made():
    """``c = a * b`` moved b's OwnedTape: the message named b before the line, so b took a's label."""
    dev = tk.Cpu()
    a = dev.tensor([1., 2.]).trace(tk.OwnedTape())
    b = dev.tensor([3., 4.]).trace(tk.OwnedTape())
    c = a * b
    text = repr(b.tape)
    assert [int(t.label[1:]) for t in (a, b, c)] == sorted(int(t.label[1:]) for t in (a, b, c))
    assert f"{b.label}'s OwnedTape was moved into the output of `{c.label} = mul({a.label}, {b.label})`" in text


@pytest.mark.parametrize("join", [tk.concat, tk.stack])
def test_the_two_tensors_a_join_error_names_are_labelled_in_the_order_they_were_made(join):
    dev = tk.Cpu()
    a, b = dev.tensor([1.0, 2.0]), dev.tensor([[1.0, 2.0, 3.0]])
    with pytest.raises(tk.ShapeError) as info:
        join([a, b])
    assert int(label(a.id)[1:]) < int(label(b.id)[1:]), str(info.value)

