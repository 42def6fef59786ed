from dsh_memory.cli import main

main()
