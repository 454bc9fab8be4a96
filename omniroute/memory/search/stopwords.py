"""Words that carry no topic in English, Dutch and German questions, left out of keyword search.

Without them, "what is my editor?" would match every memory that contains "my" or "is", and
a query with nothing relevant would still inject noise.
"""

ENGLISH = """
a about above after again against all also am an and any are aren as at be because been before
being below between both but by can could did didn do does doesn doing don down during each
else ever few for from further get got had has have having he her here hers herself him himself
his how i if in into is isn it its itself just know let like ll me might more most much must my
myself no nor not now of off on once only or other our ours ourselves out over own please re
remember s same say shall she should so some such t tell than that the their theirs them
themselves then there these they thing things this those through to too under until up us ve
very was wasn we were what when where which while who whom why will with would you your yours
yourself yourselves
""".split()

DUTCH = """
aan al alles als altijd andere ben bij daar dan dat de der deze die dit doch doen door dus een
eens en er ge geen geweest haar had heb hebben heeft hem het hier hij hoe hun iemand iets ik in
is ja je jij jou jouw kan kon kunnen maar me meer men met mij mijn moet na naar niet niets nog
nu of om omdat onder ons ook op over reeds te tegen toch toen tot u uit uw van veel voor want
waren was wat we wel werd wezen wie wil worden wordt zal ze zelf zich zij zijn zo zonder zou
""".split()

GERMAN = """
aber alle allem allen aller alles als also am an ander andere anderem anderen anderer anderes
auch auf aus bei bin bis bist da damit dann das dass dein deine dem den der des dich die dies
diese diesem diesen dieser dieses dir doch dort du durch ein eine einem einen einer eines er es
etwas euch euer für hab habe haben hat hatte ich ihm ihn ihr ihre im in ist ja jede jedem jeden
jeder jedes kann kein keine man mein meine meinem meinen meiner mich mir mit muss nach nicht
nichts noch nun nur ob oder ohne sehr sein seine sich sie sind so soll um und uns unser unter
viel vom von vor war waren warum was weil welche wenn wer werde werden wie wieder will wir wird
wo zu zum zur über
""".split()

STOP_WORDS = frozenset(ENGLISH) | frozenset(DUTCH) | frozenset(GERMAN)
