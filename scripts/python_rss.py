"""Peak RSS of one ``Llama`` that used both the chat API and the token-level
API (the same calls on Baton's ``llama_cpp`` shim and on llama-cpp-python,
whichever the interpreter imports). Prints one JSON line.

    python scripts/python_rss.py MODEL.gguf [--n-ctx 2048]
"""

import argparse
import json
import os
import resource

import llama_cpp
from llama_cpp import Llama


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--n-ctx", type=int, default=2048)
    args = parser.parse_args()
    llm = Llama(model_path=args.model, n_ctx=args.n_ctx, seed=1, verbose=False)
    after_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    chat = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Name three colours."}], max_tokens=32, temperature=0
    )
    tokens = llm.tokenize(b"The capital of France is")
    llm.reset()
    llm.eval(tokens)
    generated = []
    for token in llm.generate(tokens, temp=0, reset=True):
        generated.append(token)
        if len(generated) == 16:
            break
    chat_again = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Name three colours."}], max_tokens=32, temperature=0
    )
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "engine": "baton" if Llama.__module__.startswith("baton") else "llama-cpp-python",
                "module": llama_cpp.__file__,
                "file_mib": round(os.path.getsize(args.model) / 2**20, 1),
                "n_ctx": args.n_ctx,
                "peak_rss_after_load_mib": round(after_load / 1024, 1),
                "peak_rss_mib": round(peak_kib / 1024, 1),
                "chat_tokens": chat["usage"]["completion_tokens"],
                "chat_same_after_token_api": chat["choices"][0]["message"]["content"]
                == chat_again["choices"][0]["message"]["content"],
                "generated": len(generated),
            }
        )
    )


if __name__ == "__main__":
    main()
