from fanout_kit.cli.main import console_main

console_main()
