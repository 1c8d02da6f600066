"""JupyterLab in a real browser: what a learner sees after Run > Run All Cells.

JupyterLab runs from this environment on a temporary copy of the notebooks (outputs cleared, so
everything on the page comes from this run); the system's Chromium, driven by Playwright, opens
each notebook, runs every cell from the Run menu and reads the page: no error or stderr output,
every picture drawn, every check's verdict shown. A full-page screenshot of each notebook lands in
browser-screenshots/ (CI keeps them as an artifact), with the wall time of each notebook.
Run it with `./dev.sh test-browser`; without Playwright or Chromium it is skipped. PSTUTOR_CHROMIUM
names another Chromium-based browser (e.g. Google Chrome) than the `chromium` on the PATH.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import portpicker
import pytest
from conftest import ROOT, clean_env, descendants, wait_gone

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
CHROMIUM = os.environ.get("PSTUTOR_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    pytest.skip("Chromium is not installed (.ci/system-packages.sh installs it)", allow_module_level=True)

pytestmark = pytest.mark.browser

# A short lesson in each language, and a solved exercise, whose checks all show their verdicts.
NOTEBOOKS = [
    "notebooks/en/01_cluster.ipynb",
    "notebooks/zh/04_custom_loop.ipynb",
    "solutions/zh/01_cluster.ipynb",
]
SCREENSHOTS = ROOT / "browser-screenshots"
WALL_TIMES = SCREENSHOTS / "wall-times.txt"
# No sandbox, as Chromium refuses it to root; the rest keep it from calling Google's services (slow
# on a closed network) and from needing a GPU.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# JupyterLab's defaults, less what needs the internet or writes the notebook back.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}
RUN_TIMEOUT_S = 150
WIDTH = 1280
MAX_HEIGHT = 16_000  # a taller notebook is cut off in its screenshot (lesson 04 zh is about 9,100 px)

# What the page shows: whether the kernel is idle, the text of each rendered Markdown cell (its
# code left out), and per code cell its prompt and outputs.
READ_PAGE_JS = """() => {
  const notebook = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  return {
    idle: [...document.querySelectorAll('.jp-StatusBar-TextItem')]
      .some(item => item.textContent.endsWith('| Idle')),
    prose: [...notebook.querySelectorAll('.jp-MarkdownCell')].map(cell => {
      const shown = cell.querySelector('.jp-RenderedMarkdown')?.cloneNode(true);
      shown?.querySelectorAll('code, pre').forEach(code => code.remove());
      return shown?.textContent ?? '';
    }),
    cells: [...notebook.querySelectorAll('.jp-CodeCell')].map(cell => ({
      prompt: cell.querySelector('.jp-InputArea-prompt')?.textContent ?? '',
      outputs: [...cell.querySelectorAll('.jp-OutputArea-output')].map(out => ({
        mime: out.getAttribute('data-mime-type') ?? '',
        text: out.textContent,
        pixels: [...out.querySelectorAll('img')]
          .map(img => img.complete ? img.naturalWidth * img.naturalHeight : -1),
      })),
    })),
  };
}"""
# The window height that shows the notebook down to its last cell, without the space to scroll past it.
NOTEBOOK_HEIGHT_JS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
  panel.scrollTop = 0;
  const cells = panel.querySelectorAll('.jp-Cell');
  const below = cells[cells.length - 1].getBoundingClientRect().bottom - panel.getBoundingClientRect().bottom;
  return Math.ceil(window.innerHeight + below + 24);
}"""


@dataclass
class Lab:
    """A running JupyterLab: its folder, where it listens and its token."""

    root: Path
    url: str
    token: str

    def api(self, path: str, method: str = "GET") -> object:
        """Call JupyterLab's REST API; the decoded JSON answer."""
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
        return json.loads(body) if body else None


def _copy_without_outputs(source: Path, target: Path) -> None:
    """The notebook as committed with its outputs cleared: what the page then shows comes from this run."""
    notebook = nbformat.read(source, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def _write_settings(folder: Path) -> None:
    """User settings that JupyterLab reads instead of the learner's own."""
    for plugin, values in LAB_SETTINGS.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _stop(process: subprocess.Popen) -> None:
    """Stop JupyterLab (it shuts its kernels down), then anything of it still running."""
    below = descendants(process.pid)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pid in wait_gone(below, 10):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _wait_until_listening(lab: Lab, process: subprocess.Popen, log: Path) -> None:
    """Return once JupyterLab answers; fail with its log if it ends or stays silent."""
    deadline = time.monotonic() + 90
    while True:
        with contextlib.suppress(OSError):
            lab.api("/api/status")
            return
        assert process.poll() is None, f"JupyterLab ended at start:\n{log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"JupyterLab did not answer in 90 s:\n{log.read_text()[-2000:]}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab on a free localhost port with a token, serving a temporary copy of the notebooks."""
    home = tmp_path_factory.mktemp("lab")
    course = home / "course"
    for notebook in NOTEBOOKS:
        _copy_without_outputs(ROOT / notebook, course / notebook)
    _write_settings(home / "settings")
    port, token = portpicker.pick_unused_port(), secrets.token_hex(16)
    env = clean_env() | {"JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"),
                         "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "IPYTHONDIR": str(home / "ipython")}
    log = home / "jupyterlab.log"
    with log.open("w") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
             f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={course}", f"--LabApp.user_settings_dir={home / 'settings'}",
             f"--LabApp.workspaces_dir={home / 'workspaces'}", "--LabApp.news_url=",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.extension_manager=readonly"],
            stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=course,
        )
    try:
        running = Lab(course, f"http://127.0.0.1:{port}", token)
        _wait_until_listening(running, process, log)
        yield running
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def browser() -> Iterator[sync_api.Browser]:
    """The system's Chromium, headless, driven by Playwright."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def wall_times() -> Iterator[dict[str, str]]:
    """Each notebook's time in the browser, written next to the screenshots at the end."""
    SCREENSHOTS.mkdir(exist_ok=True)
    for old in [*SCREENSHOTS.glob("*.png"), WALL_TIMES]:
        old.unlink(missing_ok=True)
    times: dict[str, str] = {}
    yield times
    WALL_TIMES.write_text("".join(f"{name}: {line}\n" for name, line in times.items()))


def _wait_for_run(page: sync_api.Page) -> dict:
    """Wait until every cell has run (or the run stopped at an error) and every picture has loaded."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        seen = page.evaluate(READ_PAGE_JS)
        prompts = [cell["prompt"] for cell in seen["cells"]]
        loading = any(-1 in out["pixels"] for cell in seen["cells"] for out in cell["outputs"])
        ran = prompts and prompts[0].strip("[]: ") and not any("*" in prompt for prompt in prompts)
        if seen["idle"] and ran and not loading:
            return seen
        if time.monotonic() > deadline:
            pytest.fail(f"the notebook still runs after {RUN_TIMEOUT_S} s; its cells' prompts: {prompts}")
        time.sleep(0.5)


def _screenshot(page: sync_api.Page, path: Path) -> None:
    """The whole notebook in one picture: the window made as tall as the notebook, scrolled to its top."""
    height = 0
    for _ in range(5):  # cells drawn for the first time change the notebook's height
        page.set_viewport_size({"width": WIDTH, "height": min(height or 900, MAX_HEIGHT)})
        page.wait_for_timeout(300)
        wanted = page.evaluate(NOTEBOOK_HEIGHT_JS)
        if wanted == height:
            break
        height = wanted
    page.screenshot(path=path, full_page=True)


def _run_all_cells(lab: Lab, browser: sync_api.Browser, notebook: str, wall_times: dict[str, str]) -> dict:
    """Open the notebook, run it from Run > Run All Cells, keep a screenshot; what the page shows."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    picture = SCREENSHOTS / (notebook.removesuffix(".ipynb").replace("/", "-") + ".png")
    try:
        began = time.monotonic()
        page.goto(f"{lab.url}/lab/tree/{notebook}?reset&token={lab.token}")
        # Clicked before the kernel has started, Run All asks which kernel to use: wait as a learner would.
        page.locator(".jp-StatusBar-TextItem", has_text="| Idle").wait_for(timeout=60_000)
        page.keyboard.press("Control+b")  # the file browser folded away, so the notebook has the width
        opened = time.monotonic()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        seen = _wait_for_run(page)
        finished = time.monotonic()
        wall_times[notebook] = (f"{finished - began:.1f} s (opening {opened - began:.1f} s, "
                                f"Run All Cells {finished - opened:.1f} s)")
        return seen
    finally:
        with contextlib.suppress(sync_api.Error):  # also of a notebook that failed: what did it show?
            _screenshot(page, picture)
        page.close()
        with contextlib.suppress(OSError):  # a JupyterLab that died is stopped by its fixture
            for session in lab.api("/api/sessions"):  # the next notebook's kernel starts alone
                lab.api(f"/api/sessions/{session['id']}", method="DELETE")


def _is_check(cell: nbformat.NotebookNode) -> bool:
    """Whether a code cell is an exercise's check."""
    return cell.source.startswith("pstutor.check(")


def _stored_text(cell: nbformat.NotebookNode) -> str:
    """The text a cell's stored outputs show."""
    return "".join(out.get("text") or out.get("data", {}).get("text/plain", "") for out in cell.outputs)


def _problems(page: dict, code_cells: list[nbformat.NotebookNode]) -> list[str]:
    """What a learner would see go wrong, cell by cell, against the committed notebook."""
    if len(page["cells"]) != len(code_cells):
        return [f"the page shows {len(page['cells'])} code cells, the notebook has {len(code_cells)}"]
    # CommonMark reads `**粗体。**后文` as plain text: the learner sees the asterisks.
    problems = [f"Markdown cell {number} shows its emphasis marks: {line.strip()[:70]!r}"
                for number, text in enumerate(page["prose"], start=1)
                for line in text.splitlines() if "**" in line]
    for number, (seen, stored) in enumerate(zip(page["cells"], code_cells, strict=True), start=1):
        where = f"code cell {number} ({(stored.source.splitlines() or [''])[0][:50]!r})"
        if not seen["prompt"].strip("[]: "):
            problems.append(f"{where} did not run")
        for out in seen["outputs"]:
            if out["mime"] == "application/vnd.jupyter.stderr":
                problems.append(f"{where} shows an error or stderr: {out['text'][:300]!r}")
        drawn = [pixels for out in seen["outputs"] for pixels in out["pixels"] if pixels > 0]
        pictures = sum("image/png" in out.get("data", {}) for out in stored.outputs)
        if len(drawn) != pictures:
            problems.append(f"{where} shows {len(drawn)} pictures, the committed notebook {pictures}")
        shown = "".join(out["text"] for out in seen["outputs"]).strip()
        committed = _stored_text(stored).strip()
        if _is_check(stored) and shown != committed:
            problems.append(f"{where} shows the verdict {shown!r}, committed: {committed!r}")
    return problems


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_run_all_cells_shows_no_error_every_picture_and_every_verdict(lab, browser, wall_times, notebook):
    """A learner's Run > Run All Cells: a clean page, every picture, every check's committed verdict."""
    cells = nbformat.read(ROOT / notebook, as_version=4).cells
    code_cells = [cell for cell in cells if cell.cell_type == "code"]
    if notebook.startswith("solutions/"):
        assert sum(map(_is_check, code_cells)) >= 3, "a solved exercise shows the verdict of every task"
    problems = _problems(_run_all_cells(lab, browser, notebook, wall_times), code_cells)
    assert not problems, "what a learner sees go wrong:\n" + "\n".join(problems)


def test_the_rehearsal_sees_stderr_errors_broken_pictures_wrong_verdicts_and_stray_asterisks(
        lab, browser, wall_times):
    """The checks above can fail: a notebook that goes wrong in every way they look for."""
    picture = nbformat.v4.new_output("display_data", {"image/png": "iVBORw0KGgo="})
    verdict = nbformat.v4.new_output("execute_result", {"text/plain": "✅ passed"})
    new_cell = nbformat.v4.new_code_cell
    code = [
        new_cell('import sys\n\nimport pstutor\n\nprint("a warning", file=sys.stderr)'),
        new_cell('display({"image/png": "bm90IGEgcGljdHVyZQ=="}, raw=True)', outputs=[picture]),
        new_cell("""pstutor.check("01.2", tf_config_json='{"cluster": {}}')""", outputs=[verdict]),
        new_cell("1 / 0"),
    ]
    prose = [nbformat.v4.new_markdown_cell(text) for text in
             ("**谁也不等谁**。每一行", "`2 ** 3` is **eight**", "**谁也不等谁。**每一行")]
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    name = "goes_wrong_on_purpose.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=prose + code, metadata=kernel), lab.root / name)
    problems = _problems(_run_all_cells(lab, browser, name, wall_times), code)
    assert len(problems) == 5, problems
    assert problems[0].startswith("Markdown cell 3 shows its emphasis marks: '**谁也不等谁。**每一行'")
    assert "code cell 1" in problems[1] and "a warning" in problems[1]
    assert "code cell 2" in problems[2] and "shows 0 pictures" in problems[2]
    assert "code cell 3" in problems[3] and "✗ TensorFlow cannot use it" in problems[3], "the ✗ lines show"
    assert "code cell 4" in problems[4] and "ZeroDivisionError" in problems[4]
