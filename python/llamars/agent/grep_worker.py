"""grep_search's matching, run as a child process (`python -I grep_worker.py`, the job as
JSON on stdin, the text on stdout) so that a pathological regular expression is ended by
a timeout and a kill instead of holding a server thread. Standard library only."""
import json
import re
import sys


def main() -> None:
    job = json.load(sys.stdin)
    flags = re.IGNORECASE if job["ignore_case"] else 0
    pattern = re.escape(job["pattern"]) if job["literal"] else job["pattern"]
    try:
        rx = re.compile(pattern, flags)
    except re.error as e:
        json.dump({"error": f"invalid regex: {e}"}, sys.stdout)
        return
    ctx, show_num, limit, max_line = job["context_lines"], job["show_num"], job["max_results"], job["max_line"]
    out, total, reached = [], 0, False
    for full, shown in job["files"]:
        if reached:
            break
        try:
            with open(full, "rb") as f:
                head = f.read(8192)
                if b"\0" in head:  # a binary file: nothing a line match would show
                    continue
                lines = (head + f.read()).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        for i, line in enumerate(lines):
            if total >= limit:
                reached = True
                break
            if not rx.search(line):
                continue
            for j in range(max(0, i - ctx), min(len(lines), i + ctx + 1)):
                sep = ":" if j == i else "-"
                text = lines[j] if len(lines[j]) <= max_line else lines[j][:max_line] + "…"
                out.append(f"{shown}{sep}{str(j + 1) + sep if show_num else ''}{text}\n")
            if ctx:
                out.append("--\n")
            total += 1
    text = "".join(out) + f"\n---\nTotal matches: {total}\n"
    if reached:
        text += f"[{limit} matches limit reached. Narrow the path/pattern/include to see more.]\n"
    json.dump({"plain_text_response": text}, sys.stdout)


if __name__ == "__main__":
    main()
