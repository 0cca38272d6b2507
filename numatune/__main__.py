from numatune.cli import main

main()
