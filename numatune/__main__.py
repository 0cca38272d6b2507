from numatune.entry import run

run()
