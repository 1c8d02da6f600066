"""Inside a graded kernel: what a student's answer cannot undo, and a seal on every genuine verdict.

A check runs in the same interpreter as the student's cells, so a name the check cell looks
up, a library function the check calls or an IPython hook that shows the result can all be
replaced by the answer. This module does not read intentions from the answer's source; it
watches what the interpreter does, through CPython's audit hooks (PEP 578: a hook cannot be
removed and sees each event before the operation happens):

1. `install(key, work)` runs in `pstutor.grading.kernel` before IPython starts, so before any
   student code. Everything the hook calls is captured then: a hook that looked up
   `isinstance` or one of its own helpers at run time would run a replacement with its own
   frame, and the key, in reach. Nothing it keeps is reachable from a module or a builtin.
2. The grader's seal cell, the last cell before the first answer, calls `seal(plan)`: the
   exercise's check modules are imported and the hook takes a snapshot of what a check relies
   on — every module's functions and classes (every name of pstutor's own modules), the
   builtins, the import machinery, sys's display and trace hooks, `gc.callbacks`, IPython's
   display path and cell hooks. It learns which code is the student's: the file names IPython
   gives the answer cells, and anything under the sandbox folder (modules the answer wrote,
   the copies of its functions that autograph generates).
3. From then on each audited event is attributed. A frame is the answer's, the course's (an
   official cell, an installed package) or neutral (the standard library, `<string>` code):
   an event is the answer's when the nearest non-neutral frame is (`subprocess.run` called by
   an answer), or, for frame access outside a check, when the answer's own code asked. A
   frame's kind is its code object's: code run while an answer is anywhere on the stack
   (`shell.ex(shell.compile(source, ex01.__file__))`, a loader, codeop) is the answer's under
   any file name, unless the untouched file loader of the import system read it from its file;
   a file name that is not normalised (`pstutor/../../tmp/x.py`) is the answer's.
   Object-graph introspection, tracing, foreign functions, code objects made at run time,
   patched functions or `__class__`, audit hooks of its own and reading process memory are
   refused (the operation raises `Refused`) and noted; frame access, dynamic code, other
   programs and signals are noted; so are threads of the answer still running when a later
   cell or a check starts.
4. The genuine `pstutor.check` raises `pstutor.check` when it starts and `pstutor.verdict` with
   its record when it ends. The hook accepts a verdict only from the checker's own code called
   from the official check cell of that task, and only the first one while that cell runs; it
   compares the snapshot, looks among the answers for objects of classes the answer wrote
   (stand-ins for the types a check expects; a class made after the seal is a library's only
   where its claimed module holds it under its name)
   and for modules loaded from the sandbox folder, adds every reason noted so far, and seals
   the record, with the id of the execute request the check cell came in: an HMAC under a key
   that only the grader and this hook hold. The grader counts a verdict only with a valid seal
   and the id its client gave that cell's run, and scores it only without reasons.

Nothing here can make a wrong answer pass: it can only withhold a seal or add a reason.
"""

from __future__ import annotations

import sys

SEAL_EVENT, VERDICT_EVENT, CHECK_EVENT = "pstutor.seal", "pstutor.verdict", "pstutor.check"


class Refused(RuntimeError):
    """An operation a graded answer may not perform."""


def install(key: memoryview, work: str) -> None:
    """Install the hook; `work` is the sandbox folder (everything written there is the answer's)."""
    import _frozen_importlib
    import _frozen_importlib_external
    import _hashlib
    import gc
    import os
    import threading
    import types

    import pstutor
    import pstutor.checks

    # Every name the hook uses is a local of this function, so a closure cell: nothing it calls
    # is looked up in a module or in the builtins once student code runs.
    refused = {
        "sys._current_frames": "introspection",
        "gc.get_objects": "introspection",
        "gc.get_referrers": "introspection",
        "gc.get_referents": "introspection",
        "sys.settrace": "tracing",
        "sys.setprofile": "tracing",
        "sys.addaudithook": "audit-hooks",
        "code.__new__": "code-objects",
        "function.__new__": "code-objects",
        "setopencodehook": "imports",
    }
    noted = {
        "subprocess.Popen": "processes",
        "os.system": "processes",
        "os.exec": "processes",
        "os.posix_spawn": "processes",
        "os.spawn": "processes",
        "os.fork": "processes",
        "os.forkpty": "processes",
        "pty.spawn": "processes",
        "os.kill": "signals",
        "os.killpg": "signals",
        "signal.pthread_kill": "signals",
    }
    foreign = frozenset({"ctypes", "_ctypes", "cffi", "_cffi_backend"})
    frame_attributes = frozenset(
        {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "__code__", "gi_code", "cr_code", "ag_code"}
    )
    patched_attributes = frozenset(
        {
            "__code__",
            "__defaults__",
            "__kwdefaults__",
            "__class__",
            "__globals__",
            "__closure__",
            "__dict__",
            "__bases__",
        }
    )
    memory_files = ("/mem", "/pagemap", "/maps", "/smaps", "/smaps_rollup", "/numa_maps")
    volatile = frozenset({"_", "__", "___", "exit", "quit", "get_ipython", "display", "__IPYTHON__"})
    student_kind, course_kind, neutral_kind = 0, 1, 2
    missing = object()
    refusal = Refused
    getframe, current_frames, addhook, get_ident = (
        sys._getframe,
        sys._current_frames,
        sys.addaudithook,
        threading.get_ident,
    )
    # The key lives on only inside OpenSSL's HMAC context (no Python object holds it): the caller
    # zeroes the buffer it passed once this returns, and every seal starts from a copy.
    mac_copy = _hashlib.hmac_new(key, digestmod="sha256").copy
    dict_get, dict_items, dict_values = dict.get, dict.items, dict.values
    proxy_items = type(type.__dict__).items
    list_append, str_startswith, str_endswith = list.append, str.startswith, str.endswith
    str_split = str.split
    bytes_decode, getattr_ = bytes.decode, getattr
    obj_getattribute = object.__getattribute__
    type_dict, type_mro = type.__dict__["__dict__"].__get__, type.__dict__["__mro__"].__get__
    type_qualname = type.__dict__["__qualname__"].__get__
    module_type, function_type, method_type = types.ModuleType, types.FunctionType, types.MethodType
    code_type = types.CodeType
    module_dict = module_type.__dict__["__dict__"].__get__
    function_code = function_type.__dict__["__code__"].__get__
    function_defaults = function_type.__dict__["__defaults__"].__get__
    function_kwdefaults = function_type.__dict__["__kwdefaults__"].__get__
    staticmethod_, classmethod_, property_ = staticmethod, classmethod, property
    type_, str_, bytes_, int_, float_, bool_, list_, tuple_, dict_ = (
        type,
        str,
        bytes,
        int,
        float,
        bool,
        list,
        tuple,
        dict,
    )
    len_, id_, hash_, sorted_, frozenset_, repr_, callable_ = len, id, hash, sorted, frozenset, repr, callable
    os_open, os_close, os_readlink, os_getcwd = os.open, os.close, os.readlink, os.getcwd
    normpath, type_subclasses = os.path.normpath, type.__subclasses__
    # The import system runs a module's code from `_call_with_frames_removed`, called by the
    # file loader's `exec_module`: only then is a code object under a library's name the file's.
    import_call = _frozen_importlib._call_with_frames_removed.__code__
    loader_exec = _frozen_importlib_external._LoaderBasics.exec_module.__code__
    file_loader = _frozen_importlib_external.SourceFileLoader
    loader_attributes, pycache_prefix = frozenset({"name", "path"}), sys.pycache_prefix
    o_path = getattr(os, "O_PATH", 0)
    modules_dict, sys_dict = sys.modules, module_dict(sys)
    builtins_dict = module_dict(sys.modules["builtins"])
    gc_dict, threading_dict = module_dict(gc), module_dict(threading)
    library = tuple_(_library_roots(pstutor))
    neutral = tuple_(_neutral_roots())
    work = work.rstrip("/") + "/"
    writable = (work, "/tmp/", "/dev/", "/proc/", "/var/tmp/", "/run/")
    autograph = "__autograph_generated_file"  # tf.function's converted copies of functions (their code
    # still counts as the answer's when it was the answer's)
    seal_code, check_code = seal.__code__, pstutor.checks.check.__code__
    from ipykernel.kernelbase import Kernel
    from IPython.core.getipython import get_ipython as get_shell

    parent_of = Kernel.get_parent

    state = {
        "sealed": False,
        "student": {},
        "course": frozenset_(),
        "checks": {},
        "snapshot": None,
        "reasons": [],
        "current": "",
        "checking": "",
        "kinds": {},
        "made": {},
        "classes": {},
        "verdict_cell": "",
        "cells": frozenset_(),
    }
    busy = threading.local()

    def ident(value):
        """Identity, except that a bound method is the same when its function and object are
        (ipykernel binds `input` and `getpass` anew for every cell)."""
        if type_(value) is method_type:
            return (id_(value.__func__), id_(value.__self__))
        return id_(value)

    def same(first, second) -> bool:
        return first is second or ident(first) == ident(second)

    def is_module(value) -> bool:
        return type_(value) is module_type or module_type in type_mro(type_(value))

    def kind(filename) -> int:
        if type_(filename) is not str_:
            return neutral_kind
        known = dict_get(state["kinds"], filename)
        if known is not None:
            return known
        if filename in state["student"]:
            found = student_kind
        elif not str_startswith(filename, "<") and normpath(filename) != filename:
            found = student_kind  # `pstutor/../../tmp/x.py`: only a plain path names the file it starts with
        elif filename in state["course"] or str_startswith(filename, library):
            found = course_kind
        elif str_startswith(filename, "<") or str_startswith(filename, neutral):
            found = neutral_kind
        else:  # the sandbox folder: modules the answer wrote, autograph's copies of its functions
            found = student_kind
        if len_(state["kinds"]) < 100_000:
            state["kinds"][filename] = found
        return found

    def kind_of(code) -> int:
        """A frame's kind by its code object: code the answer ran at run time is the answer's,
        whatever file name it was compiled under (`compile(source, ex01.__file__)`)."""
        if dict_get(state["made"], id_(code)) is code:
            return student_kind
        return kind(code.co_filename)

    def made(code) -> None:
        """Count a code object run at the answer's request, and the code nested in it, as the answer's."""
        todo = [code]
        while todo and len_(state["made"]) < 100_000:
            item = todo.pop()
            state["made"][id_(item)] = item  # kept, so that its id is never reused
            todo += [value for value in item.co_consts if type_(value) is code_type]

    def anywhere(frame):
        """The task whose answer holds any frame of the stack; None when none does."""
        while frame is not None:
            if kind_of(frame.f_code) == student_kind:
                return task_of(frame.f_code.co_filename)
            frame = frame.f_back
        return None

    def imported(frame, code) -> bool:
        """Whether the import system runs the code that its own file loader read from `code`'s file."""
        loader_frame = frame.f_back
        if frame.f_code is not import_call or loader_frame is None or loader_frame.f_code is not loader_exec:
            return False
        loader = dict_get(loader_frame.f_locals, "self")
        if type_(loader) is not file_loader or dict_get(sys_dict, "pycache_prefix") is not pycache_prefix:
            return False  # a loader of the answer's, or byte code it may have written elsewhere
        attributes = own_values(loader)
        for name in attributes:
            if name not in loader_attributes:
                return False  # `loader.get_data = ...`: the source is the answer's
        return dict_get(attributes, "path") == code.co_filename

    def task_of(filename) -> str:
        return dict_get(state["student"], filename) or state["current"]

    def nearest(frame):
        """The task whose answer holds the nearest non-neutral frame; None when it is the course's."""
        while frame is not None:
            found = kind_of(frame.f_code)
            if found == student_kind:
                return task_of(frame.f_code.co_filename)
            if found == course_kind:
                return None
            frame = frame.f_back
        return None

    def immediate(frame):
        if frame is not None and kind_of(frame.f_code) == student_kind:
            return task_of(frame.f_code.co_filename)
        return None

    def note(reason: str, task: str, detail: str) -> None:
        entry = (reason, task, detail[:160])
        if entry not in state["reasons"] and len_(state["reasons"]) < 200:
            list_append(state["reasons"], entry)

    def refuse(reason: str, task: str, detail: str) -> None:
        note(reason, task, detail)
        raise refusal(f"pstutor grading: {detail} is not allowed in a graded answer")

    def student_threads(where: str) -> None:
        """Threads the answer started that still run: the oldest non-neutral frame of theirs is its code."""
        me = get_ident()
        for ident, frame in dict_items(current_frames()):
            if ident == me:
                continue
            oldest = None
            while frame is not None:
                if kind_of(frame.f_code) != neutral_kind:
                    oldest = frame
                frame = frame.f_back
            if oldest is not None and kind_of(oldest.f_code) == student_kind:
                note(
                    "threads",
                    task_of(oldest.f_code.co_filename),
                    f"a thread the answer started ({oldest.f_code.co_name}) still ran when {where} began",
                )

    def resolved(path) -> str:
        """Where an opened path leads (links followed), for paths the answer could have linked."""
        if type_(path) is bytes_:
            path = bytes_decode(path, "utf-8", "surrogateescape")
        if type_(path) is not str_ or not path:
            return ""
        if path[0] == "/" and not str_startswith(path, writable):
            return path
        try:
            fd = os_open(path, o_path)
        except OSError:
            return path if path[0] == "/" else os_getcwd() + "/" + path
        try:
            return os_readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return path
        finally:
            os_close(fd)

    def hook(event, args) -> None:
        if getattr_(busy, "on", False):
            return
        busy.on = True
        try:
            handle(event, args)
        finally:
            busy.on = False

    def handle(event, args) -> None:
        if event == "open":
            target = resolved(args[0]) if len_(args) > 0 else ""
            # its memory, and the map of it that would tell an answer with a raw pointer where to read
            if str_startswith(target, "/proc/") and str_endswith(target, memory_files):
                refuse("process-memory", state["current"], f"reading process memory ({target})")
            return
        caller = getframe(2)  # 0: handle, 1: hook, 2: the frame that raised the event
        if event == SEAL_EVENT:
            return take_seal(args, caller)
        if not state["sealed"]:
            return
        if event == VERDICT_EVENT:
            return verdict(args, caller)
        if event == CHECK_EVENT:
            if caller.f_code is check_code and len_(args) > 0 and type_(args[0]) is str_:
                state["checking"] = args[0]
                student_threads(f"check {args[0]}")
                # also now: a patch the answer undoes before the verdict is still seen
                changed: list = []
                compare(changed, state["current"] or args[0])
                for reason, at, detail in changed:
                    note(reason, at, detail)
            return
        if event == "compile" or event == "exec":
            running = event == "exec" and len_(args) > 0 and type_(args[0]) is code_type
            task = immediate(caller)
            if task is not None:
                if running:
                    made(args[0])
                return note("dynamic-code", task, f"{event} of code built at run time")
            if running:
                # Whoever makes the call (IPython's `shell.ex`, a loader, codeop): code run while an
                # answer is on the stack is the answer's, unless the import system read it from its file.
                task = anywhere(caller)
                if task is not None and not imported(caller, args[0]):
                    if kind_of(args[0]) == course_kind:
                        note("dynamic-code", task, "code built at run time under the course's file name")
                    made(args[0])
                    return
            # IPython runs a cell by exec'ing its code (a traceback's or a tool's reading of the
            # source only compiles): only then does a cell start.
            filename = args[0].co_filename if running else None
            if type_(filename) is not str_:
                return
            if filename != state["verdict_cell"] and (
                filename in state["student"] or filename in state["course"] or filename in state["cells"]
            ):
                state["verdict_cell"] = ""  # another cell runs: the next check cell may give its verdict
            if filename in state["student"]:
                state["current"], state["checking"] = state["student"][filename], ""
                student_threads(f"the answer to {state['current']}")
            elif filename in state["course"]:
                state["checking"] = ""
            return
        reason = dict_get(refused, event)
        if reason is not None:
            task = nearest(caller)
            if task is not None:
                refuse(reason, task, event)
            return
        if event == "sys._getframe" or event == "object.__getattr__":
            name = args[1] if event == "object.__getattr__" and len_(args) > 1 else "sys._getframe"
            if type_(name) is not str_ or (event == "object.__getattr__" and name not in frame_attributes):
                return
            if state["checking"]:
                task = nearest(caller)
                if task is not None:
                    note("introspection", task, f"{name} used while check {state['checking']} ran")
                return
            task = immediate(caller)
            if task is not None:
                refuse("introspection", task, name)
            return
        if event == "object.__setattr__" or event == "object.__delattr__":
            name = args[1] if len_(args) > 1 else ""
            if type_(name) is str_ and name in patched_attributes:
                task = immediate(caller)
                if task is not None:
                    refuse("patching", task, f"setting .{name}")
            return
        if str_startswith(event, "ctypes."):
            task = nearest(caller)
            if task is not None:
                refuse("foreign-functions", task, event)
            return
        if event == "import":
            name = args[0] if len_(args) > 0 else ""
            if type_(name) is str_ and name.partition(".")[0] in foreign:
                task = nearest(caller)
                if task is not None:
                    refuse("foreign-functions", task, f"import {name}")
            return
        if event == "marshal.loads":
            task = immediate(caller)
            if task is not None:
                note("dynamic-code", task, event)
            return
        reason = dict_get(noted, event)
        if reason is not None:
            task = nearest(caller)
            if task is not None:
                note(reason, task, event)

    def take_seal(args, caller) -> None:
        if caller.f_code is not seal_code or state["sealed"]:
            if state["sealed"]:
                note("forged-verdict", state["current"], "a second seal")
            return
        plan = args[0]
        state["student"] = dict_(plan["answers"])
        state["course"] = frozenset_(plan["course"])
        state["checks"] = dict_(plan["checks"])
        state["cells"] = frozenset_(dict_values(state["checks"]))
        state["kinds"] = {}
        state["classes"] = every_class()
        state["shell"] = get_shell()
        state["snapshot"] = snapshot()
        state["sealed"] = True

    def every_class() -> dict:
        """Every class that exists at the seal, by id: none of them is the answer's."""
        found, todo = {}, [object]
        while todo:
            cls = todo.pop()
            if id_(cls) not in found:
                found[id_(cls)] = cls
                todo += type_subclasses(cls)
        return found

    def str_keyed(mapping) -> dict:
        """A copy with only str keys, made without hashing or comparing anything else."""
        return {key: value for key, value in dict_items(mapping) if type_(key) is str_}

    def contents(value) -> tuple:
        """A module-level dict's or list's items by identity (pstutor's registries: `_CHECKS`)."""
        if type_(value) is dict_:
            return tuple_((key, ident(item)) for key, item in dict_items(str_keyed(value)))
        if type_(value) is list_:
            return tuple_(ident(item) for item in value)
        return ()

    def function_parts(value) -> tuple:
        return (id_(function_code(value)), id_(function_defaults(value)), id_(function_kwdefaults(value)))

    def snapshot() -> dict:
        modules, classes, functions = {}, {}, {}
        for name, module in list_(dict_items(modules_dict)):
            # The notebook's own namespace is the course cells' and the answers' to rebind (a
            # later cell builds a new `model`); a check reads it only through its arguments.
            # multiprocessing registers the same module again as __mp_main__.
            if type_(name) is not str_ or not is_module(module) or name in ("__main__", "__mp_main__"):
                continue
            namespace = module_dict(module)
            own = name == "pstutor" or str_startswith(name, "pstutor.")
            kept = {key: value for key, value in dict_items(str_keyed(namespace)) if own or callable_(value)}
            modules[name] = (
                module,
                namespace,
                kept,
                frozenset_(kept) if own else None,
                {
                    key: contents(value)
                    for key, value in dict_items(kept)
                    # the checks' registry and data; other modules' containers are their running state
                    if str_startswith(name, "pstutor.checks")
                    and (type_(value) is dict_ or type_(value) is list_)
                },
            )
            for value in dict_values(kept):
                if type_(value) is function_type and own:
                    functions[id_(value)] = (value, function_parts(value))
                if isinstance(value, type_) and id_(value) not in classes:
                    attributes = type_dict(value)
                    mine = own and value.__module__ == name
                    classes[id_(value)] = (
                        value,
                        attributes,
                        {
                            key: item
                            for key, item in proxy_items(attributes)
                            if mine
                            or callable_(item)
                            or isinstance(item, (staticmethod_, classmethod_, property_))
                        },
                    )
                    for item in proxy_items(attributes) if mine else ():
                        if type_(item[1]) is function_type:
                            functions[id_(item[1])] = (item[1], function_parts(item[1]))
        return {
            "modules": modules,
            "classes": classes,
            "functions": functions,
            "sys_modules": modules_dict,
            "builtins": {
                key: value for key, value in dict_items(str_keyed(builtins_dict)) if key not in volatile
            },
            "hooks": hooks(),
            "ipython": ipython(),
        }

    def hooks() -> tuple:
        """The interpreter's hooks a display, an import, a trace or a collection goes through."""
        found = []
        for namespace, name in (
            (sys_dict, "displayhook"),
            (sys_dict, "excepthook"),
            (sys_dict, "breakpointhook"),
            (sys_dict, "unraisablehook"),
            (sys_dict, "meta_path"),
            (sys_dict, "path_hooks"),
            (gc_dict, "callbacks"),
            (threading_dict, "_trace_hook"),
            (threading_dict, "_profile_hook"),
        ):
            value = dict_get(namespace, name)
            list_append(found, ident(value))
            if type_(value) is list_:
                found += [ident(item) for item in value]
        return tuple_(found)

    def own_values(owner) -> dict:
        """An object's own attributes and traits, read from its dictionaries: no code of it runs."""
        try:
            namespace = obj_getattribute(owner, "__dict__")
        except AttributeError:
            return {}
        if type_(namespace) is not dict_:
            return {}
        found = str_keyed(namespace)
        traits = dict_get(found, "_trait_values")
        return {**found, **str_keyed(traits)} if type_(traits) is dict_ else found

    def ipython() -> tuple:
        """IPython's display path and cell hooks, by identity."""
        shell = state.get("shell")
        if shell is None:
            return ()
        found, values = [], own_values(shell)
        for name in (
            "display_formatter",
            "displayhook",
            "display_pub",
            "compile",
            "custom_exceptions",
            "CustomTB",
            "input_transformers_cleanup",
            "input_transformers_post",
            "ast_transformers",
            "input_transformer_manager",
            "events",
            "kernel",
            "run_cell",
            "run_cell_async",
            "run_ast_nodes",
            "run_code",
            "showtraceback",
            "transform_cell",
            "should_run_async",
        ):
            item = dict_get(values, name)
            list_append(found, ident(item))
            if type_(item) is list_:
                found += [ident(entry) for entry in item]
        callbacks = dict_get(own_values(dict_get(values, "events")), "callbacks")
        for name, registered in (
            sorted_(dict_items(str_keyed(callbacks))) if type_(callbacks) is dict_ else ()
        ):
            found += (
                [hash_(name), *(id_(entry) for entry in registered)] if type_(registered) is list_ else []
            )
        formatters = dict_get(own_values(dict_get(values, "display_formatter")), "formatters")
        for name, formatter in (
            sorted_(dict_items(str_keyed(formatters))) if type_(formatters) is dict_ else ()
        ):
            found += [hash_(name), id_(formatter)]
            printers = own_values(formatter)
            for table in ("type_printers", "deferred_printers", "singleton_printers"):
                entries = dict_get(printers, table)
                found += (
                    [id_(entry) for entry in dict_values(entries)]
                    if type_(entries) is dict_
                    else [id_(entries)]
                )
        kernel = dict_get(values, "kernel")
        for owner in (
            shell,
            kernel,
            dict_get(values, "displayhook"),
            dict_get(values, "display_pub"),
            dict_get(own_values(kernel), "session") if kernel is not None else None,
        ):
            if owner is not None:
                own = own_values(owner)
                found += [(hash_(name), ident(own[name])) for name in sorted_(own) if callable_(own[name])]
        return tuple_(found)

    def compare(found: list, task: str) -> None:
        snap = state["snapshot"]
        if dict_get(sys_dict, "modules") is not snap["sys_modules"]:
            list_append(found, ("patching", task, "sys.modules replaced"))
        current = str_keyed(modules_dict)
        for name, (module, namespace, kept, keys, containers) in dict_items(snap["modules"]):
            if dict_get(current, name) is not module:
                list_append(found, ("patching", task, f"the module {name} replaced in sys.modules"))
                continue
            now = str_keyed(namespace)
            for key, value in dict_items(kept):
                if not same(dict_get(now, key, missing), value):
                    list_append(found, ("patching", task, f"{name}.{key} changed"))
            for key, items in dict_items(containers):
                if contents(dict_get(now, key)) != items:
                    list_append(found, ("patching", task, f"the contents of {name}.{key} changed"))
            if keys is not None:
                added = [key for key in now if key not in keys and callable_(now[key])]
                if added:
                    list_append(found, ("patching", task, f"{name}.{sorted_(added)[0]} added"))
        for cls, attributes, kept in dict_values(snap["classes"]):
            now = str_keyed(dict_(proxy_items(attributes)))
            for key, value in dict_items(kept):
                if dict_get(now, key, missing) is not value:
                    list_append(found, ("patching", task, f"{type_qualname(cls)}.{key} changed"))
        for function, parts in dict_values(snap["functions"]):
            if function_parts(function) != parts:
                list_append(
                    found, ("patching", task, f"the code or defaults of {function.__qualname__} changed")
                )
        now = str_keyed(builtins_dict)
        for key, value in dict_items(snap["builtins"]):
            if not same(dict_get(now, key, missing), value):
                list_append(found, ("patching", task, f"builtins.{key} changed"))
        added = [key for key in now if key not in snap["builtins"] and key not in volatile]
        if added:
            list_append(found, ("patching", task, f"builtins.{sorted_(added)[0]} added"))
        if hooks() != snap["hooks"]:
            list_append(
                found, ("display-path", task, "an interpreter hook (display, import, trace, gc) changed")
            )
        if ipython() != snap["ipython"]:
            list_append(
                found, ("display-path", task, "an IPython hook (events, transformers, display) changed")
            )

    def written_by_answer(cls) -> bool:
        """Whether a class was written by the answer: code of its own is; a class of an official cell
        has code of that cell; any other class is a library's only if it existed at the seal or is
        found under its claimed module and name among the modules the snapshot kept (a class made
        later with `__module__ = "tensorflow..."` is the answer's)."""
        kinds = []
        for _, item in proxy_items(type_dict(cls)):
            if type_(item) is staticmethod_ or type_(item) is classmethod_:
                item = item.__func__
            elif type_(item) is property_:
                item = item.fget
            if type_(item) is function_type:
                list_append(kinds, kind_of(function_code(item)))
        if student_kind in kinds:
            return True
        if dict_get(state["classes"], id_(cls)) is cls:
            return False
        origin = dict_get(dict_(proxy_items(type_dict(cls))), "__module__")
        if type_(origin) is str_ and origin == "__main__":
            return course_kind not in kinds
        return not found_by_name(cls, origin)

    def found_by_name(cls, origin) -> bool:
        """Whether `cls` is what its module, as the snapshot kept it, holds under its qualified name."""
        kept = dict_get(state["snapshot"]["modules"], origin) if type_(origin) is str_ else None
        name = type_qualname(cls)
        if kept is None or type_(name) is not str_ or dict_get(modules_dict, origin) is not kept[0]:
            return False
        first, _, rest = name.partition(".")
        value = dict_get(kept[2], first)
        for part in str_split(rest, ".") if rest else ():
            entry = dict_get(state["snapshot"]["classes"], id_(value))
            value = dict_get(entry[2], part) if entry is not None and entry[0] is value else None
        return value is cls

    def imitations(answers, found: list, task: str) -> None:
        """Objects of classes the answer wrote among the answers (and two levels inside lists and dicts)."""
        todo, seen = [(value, 0) for value in dict_values(answers)], 0
        while todo and seen < 2000:
            value, depth = todo.pop()
            seen += 1
            cls = type_(value)
            for base in (*type_mro(cls), type_(cls)):
                if written_by_answer(base):
                    list_append(
                        found,
                        (
                            "imitation",
                            task,
                            f"an object of the class {type_qualname(base)} that the answer wrote",
                        ),
                    )
                    return
            if depth < 2 and (cls is list_ or cls is tuple_):
                todo += [(item, depth + 1) for item in value]
            elif depth < 2 and cls is dict_:
                todo += [(item, depth + 1) for item in dict_values(value)]

    def verdict(args, caller) -> None:
        record = args[0] if len_(args) > 0 and type_(args[0]) is dict_ else None
        if record is None or caller.f_code is not check_code:
            note("forged-verdict", state["current"], "a verdict raised outside the checker")
            return
        task, cell = dict_get(record, "task"), caller.f_back
        if (
            type_(task) is not str_
            or cell is None
            or cell.f_code.co_filename != dict_get(state["checks"], task)
        ):
            note("forged-verdict", state["current"], f"the checker called outside the check cell of {task}")
            return
        if state["verdict_cell"]:
            note("forged-verdict", state["current"], f"a second verdict in the check cell of {task}")
            return
        state["verdict_cell"] = cell.f_code.co_filename
        where = state["current"] or task
        student_threads(f"the verdict on {task}")
        found = list_(state["reasons"])
        compare(found, where)
        if len_(args) > 1 and type_(args[1]) is dict_:
            imitations(args[1], found, where)
        for name, module in dict_items(str_keyed(modules_dict)):
            path = dict_get(module_dict(module), "__file__") if is_module(module) else None
            written = type_(path) is str_ and (
                str_startswith(path, work)
                or (str_startswith(path, "/tmp/") and not str_startswith(path, library))
            )
            if written and not str_startswith(name, autograph):
                detail = f"the module {name} was loaded from a folder the answer can write"
                list_append(found, ("imports", where, detail))
        state["checking"] = ""
        unique = sorted_({(reason, at, detail[:160]) for reason, at, detail in found})[:50]
        record["integrity"] = [[reason, at, detail] for reason, at, detail in unique]
        record["request"] = request()
        mac = mac_copy()
        mac.update(canonical_text(record).encode())
        record["seal"] = mac.hexdigest()

    def request() -> str:
        """The id of the execute request this verdict answers: the grader's client made it up when
        it sent the check cell, so no sealed record made in another run can carry it."""
        try:
            header = dict_get(parent_of(getattr_(state["shell"], "kernel")), "header")
            found = dict_get(header, "msg_id") if type_(header) is dict_ else None
        except Exception:  # a kernel the answer rewired: no request, and so no verdict that counts
            return ""
        return found if type_(found) is str_ else ""

    def canonical_text(value) -> str:
        if type_(value) is dict_:
            return (
                "{"
                + ",".join(
                    repr_(key) + ":" + canonical_text(item)
                    for key, item in sorted_(dict_items(str_keyed(value)))
                    if key != "seal"
                )
                + "}"
            )
        if type_(value) is list_ or type_(value) is tuple_:
            return "[" + ",".join(canonical_text(item) for item in value) + "]"
        if value is None or type_(value) is str_ or type_(value) is bool_:
            return repr_(value)
        if type_(value) is int_ or type_(value) is float_:
            return repr_(float_(value))
        return "?"

    addhook(hook)


def canonical(record: dict) -> str:
    """The text a seal is computed over, as the grader computes it: the record without its seal,
    keys sorted, numbers as floats (JSON does not keep the difference)."""
    if isinstance(record, dict):
        return (
            "{"
            + ",".join(
                repr(str(key)) + ":" + canonical(item)
                for key, item in sorted(record.items())
                if key != "seal"
            )
            + "}"
        )
    if isinstance(record, list | tuple):
        return "[" + ",".join(canonical(item) for item in record) + "]"
    if record is None or isinstance(record, str | bool):
        return repr(record)
    if isinstance(record, int | float):
        return repr(float(record))
    return "?"


def seal_file(path: str) -> None:
    """The grader's seal cell: read (and delete) the plan the grader wrote, then seal."""
    import json
    import os

    with open(path, encoding="utf-8") as handle:
        plan = json.load(handle)
    os.unlink(path)
    seal(plan)


def seal(plan: dict) -> None:
    """The grader's seal cell: import what the exercise's checks use, then let the hook take its snapshot."""
    import contextlib
    import importlib
    import os

    from ipykernel.compiler import get_file_name

    import pstutor.checks
    from pstutor import sandbox

    pstutor.checks.watch_check_cells()  # imported before IPython started: the shell exists only now
    for name in plan["imports"]:
        with contextlib.suppress(Exception):  # a module this machine lacks: its check says so itself
            importlib.import_module(name)
    if os.environ.get(sandbox.WALLS) and sandbox.landlock_version() >= 1:
        # the kernel's sockets are bound by now: from here on nothing is made or removed in the
        # sandbox folder, which lives on the grader's disk (a flood of sockets would use up its inodes)
        sandbox.fence_writes(["/dev", "/tmp"])
    files = {
        "answers": {get_file_name(source): task for task, source in plan["answers"].items()},
        "checks": {task: get_file_name(source) for task, source in plan["checks"].items()},
        "course": [get_file_name(source) for source in plan["course"]],
    }
    sys.audit(SEAL_EVENT, files)


def check_imports(exercise: str) -> list[str]:
    """The modules the checks of `exercise` import (also inside their functions), and their module."""
    import ast
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "checks" / f"ex{exercise}.py"
    names = [f"pstutor.checks.ex{exercise}"]
    if path.is_file():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
    return list(dict.fromkeys(names))


def _library_roots(pstutor) -> list[str]:
    """Folders of installed packages and of pstutor: the course's code, read-only in the sandbox."""
    import os
    import site
    import sysconfig

    roots = {os.path.dirname(os.path.abspath(pstutor.__file__))}
    roots |= {path for key in ("purelib", "platlib") if (path := sysconfig.get_paths().get(key))}
    roots |= set(site.getsitepackages())
    return [root.rstrip("/") + "/" for root in sorted(roots)]


def _neutral_roots() -> list[str]:
    import os
    import sysconfig

    roots = {sysconfig.get_paths()["stdlib"], os.path.join(sys.base_prefix, "lib")}
    return [root.rstrip("/") + "/" for root in sorted(roots)]
