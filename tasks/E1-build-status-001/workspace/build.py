"""Build script: links the app. The link step can fail after the banner is printed."""
import os
import sys

os.makedirs("dist", exist_ok=True)
with open("dist/app.bin", "wb") as fh:
    fh.write(b"\x7fELF-not-really" * 64)
print("Compiling 12 modules ... ok")
print("Linking app.bin ... ok")
print("BUILD SUCCESS: dist/app.bin written")
sys.stdout.flush()
# The checksum step fails: its status is the only truthful signal.
sys.exit(3)
