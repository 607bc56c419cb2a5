print("copied script")
