from optnet.cli import main

main()
