from fanout.cli import console_main

console_main()
