from .cli import run

if __name__ == "__main__":  # not when a fork server imports the main module as __mp_main__
    run()
