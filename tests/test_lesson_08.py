"""Lesson 8's train.py is a program a learner can take to a real cluster, in either language."""

import ast
import textwrap

from conftest import ROOT

from pstutor import build, literals

SOURCE = ROOT / "lessons" / "08_real_cluster.md"


def _programs() -> tuple[str, str]:
    """The English train.py of the lesson and its Chinese twin from the strings table."""
    cells = build.read_lesson(SOURCE)
    [table] = [literals.parse_table(c.source) for c in cells if c.kind == "strings"]
    [english] = [key for key in table if key.lstrip().startswith("# train.py")]
    return textwrap.dedent(english), textwrap.dedent(table[english])


def _imports(program: str) -> set[str]:
    tree = ast.parse(program)
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    return names | {node.module.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module}


def test_the_chinese_train_py_is_the_same_program_with_chinese_messages():
    english, chinese = _programs()
    assert literals.program_shape(english) == literals.program_shape(chinese)
    assert english != chinese and "协调器：" in chinese


def test_train_py_needs_only_tensorflow_and_numpy_and_picks_its_role_from_tf_config():
    for program in _programs():
        assert _imports(program) == {"os", "socket", "numpy", "tensorflow"}, "no pstutor on a real machine"
        assert "TFConfigClusterResolver()" in program and "resolver.task_type" in program
        assert "resolver.task_id" in program and '"evaluator"' in program
        # Keras 2 is chosen before TensorFlow is imported
        assert program.index("TF_USE_LEGACY_KERAS") < program.index("import tensorflow")


def test_train_py_restores_on_start_and_reads_and_writes_through_the_coordinator():
    english, _ = _programs()
    assert "manager.latest_checkpoint" in english and "checkpoint.restore(" in english
    assert "options=on_chief" in english.split("checkpoint.restore(", 1)[1].split("\n", 1)[0]
    assert "manager.save(options=on_chief)" in english and "initial_epoch=done" in english


def test_a_multi_line_literal_keeps_its_lines_in_the_chinese_code():
    code = "PROGRAM = '''\\\nprint(\"hi\")\n'''\nprint(len(PROGRAM))\n"
    chinese = literals.translate(code, {'print("hi")\n': 'print("你好")\n'})
    assert chinese == "PROGRAM = '''\\\nprint(\"你好\")\n'''\nprint(len(PROGRAM))\n"
    assert literals.program_shape(code) == literals.program_shape(chinese)
    escaped = literals.translate("x = '''\\\na\n'''\n", {"a\n": "甲 \\ 乙\n"})  # a backslash survives
    assert ast.literal_eval(escaped.split("= ", 1)[1]) == "甲 \\ 乙\n"
