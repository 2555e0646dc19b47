# Sourced by the server tests: need_openai makes `import openai` work in
# python3, pip-installing the official client when it is missing, and exits
# the test with a skip (77) when that cannot be done.
need_openai() {
    python3 -c "import openai" 2>/dev/null && return 0
    python3 -m pip install -q openai >/dev/null 2>&1 ||
        python3 -m pip install -q --break-system-packages openai >/dev/null 2>&1 ||
        { echo "SKIP: python3 cannot import openai and pip cannot install it"; exit 77; }
}
