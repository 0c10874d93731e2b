"""Processes that never call CUDA get no trace file: a plain C++ program and a Python interpreter."""
import os
import sys

import e2e_lib

case = e2e_lib.Case()
case.run_traced([case.program("no_cuda")], expect_trace=False)
case.check("files written for no_cuda", [], sorted(os.listdir(case.args.out_dir)))
case.run_traced([sys.executable, "-c", "print('no CUDA here either')"], expect_trace=False)
case.check("files written for python -c", [], sorted(os.listdir(case.args.out_dir)))
case.finish()
