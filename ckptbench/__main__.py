from ckptbench.entry import main

main()
